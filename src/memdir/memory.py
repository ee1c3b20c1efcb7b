"""The Memory facade: the one library API that the CLI, the MCP server and the agent tools
call. It resolves where memory lives, who is writing (session, surface, agent), and whether
writing is allowed at all; the concept modules own the rules and the store owns the rows.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping

from . import facts, hot, procedures, search, sessions
from .errors import ConflictError, DisabledError, NotFoundError, ValidationError
from .models import Fact, Hit, HotWrite, Procedure, Provenance, Session
from .paths import (
    MEMORY_ENV,
    PROJECT_DIR,
    SESSION_ENV,
    STATE_ENV,
    Layout,
    resolve_memory_dir,
    resolve_state_dir,
)
from .records import Record
from .settings import Settings, config_template, load_settings
from .storage import files
from .storage.sqlite import SQLiteStore

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

Clock = Callable[[], float]


def iso(moment: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(moment))


class Memory:
    """One store, seen by one caller. Cheap to create; the database opens on first use."""

    def __init__(
        self,
        state_dir: str | None = None,
        *,
        session: str | None = None,
        surface: str = "cli",
        agent: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        clock: Clock = time.time,
    ) -> None:
        env = os.environ if env is None else env
        cwd = os.getcwd() if cwd is None else cwd
        self.state = resolve_state_dir(state_dir, env, cwd)
        self.settings: Settings = load_settings(os.path.join(self.state.path, "config.toml"))
        memory_dir = resolve_memory_dir(self.state.path, self.settings.path, env, cwd)
        self.layout = Layout(self.state.path, memory_dir)
        self.surface = sessions.check_surface(surface)
        self.agent = agent
        self.clock = clock
        self.store = SQLiteStore(
            self.layout.db,
            busy_timeout_ms=self.settings.busy_timeout_ms,
            create=self.settings.enabled,
        )
        self.session_id: str | None = None
        self._session: Session | None = None
        self.bind_session(session if session is not None else env.get(SESSION_ENV) or None)

    # -- lifecycle ---------------------------------------------------------------------

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def path(self) -> str:
        """The memory root: every memory file lives under it (L2)."""
        return self.layout.memory_dir

    def child_env(self) -> dict[str, str]:
        """L5: what a process that memdir starts needs to reach the same memory."""
        env = {STATE_ENV: self.state.path, MEMORY_ENV: self.layout.memory_dir}
        if self.session_id:
            env[SESSION_ENV] = self.session_id
        return env

    def bind_session(self, session_id: str | None) -> None:
        """Act as `session_id` from now on (U4), e.g. a server that started its own session."""
        self.session_id = sessions.check_id(session_id) if session_id else None
        self._session = None

    @property
    def session(self) -> Session | None:
        """The current session's record (U4), or None for a plain top-level caller."""
        if self.session_id and self._session is None:
            found = self.store.get_session(self.session_id)
            if found is None:
                raise NotFoundError(
                    f"unknown session {self.session_id!r}: start one with `memdir session start`"
                )
            self._session = found
        return self._session

    @property
    def read_only(self) -> bool:
        session = self.session
        return session is not None and session.is_subagent

    # -- hot memory (H) ----------------------------------------------------------------

    def hot(self) -> str:
        return hot.read(self.layout)

    def hot_set(self, text: str) -> HotWrite:
        self._writable("hot")
        return self._hot_update(lambda _current: text, replace=True)

    def hot_append(self, text: str) -> HotWrite:
        self._writable("hot")
        return self._hot_update(lambda current: hot.appended(current, text))

    def hot_remove(self, *, line: str | None = None, section: str | None = None) -> HotWrite:
        if (line is None) == (section is None):
            raise ValidationError("remove either a line or a section of hot memory, not both")
        self._writable("hot")
        if line is not None:
            return self._hot_update(lambda current: hot.without_line(current, line))
        assert section is not None
        return self._hot_update(lambda current: hot.without_section(current, section))

    def _hot_update(self, change: Callable[[str], str], replace: bool = False) -> HotWrite:
        result = hot.update(self.layout, self.settings.hot_cap_chars, change, replace=replace)
        self._count("hot")
        return result

    # -- facts (F) ---------------------------------------------------------------------

    def add_fact(self, content: str, category: str) -> Fact:
        facts.check_category(category)
        content = facts.check_content(content, self.settings.max_entry_bytes)
        self._writable("facts")
        return self.store.add_fact(category, content, self._now(), self._provenance())

    def add_facts(self, rows: list[tuple[str, str]]) -> list[int]:
        """Bulk import: (content, category) pairs in one transaction."""
        checked = [
            (
                facts.check_category(category),
                facts.check_content(content, self.settings.max_entry_bytes),
            )
            for content, category in rows
        ]
        self._writable("facts")
        return self.store.add_facts(checked, self._now(), self._provenance())

    def supersede_fact(self, fact_id: int | str, content: str, category: str | None = None) -> Fact:
        fact_id = facts.check_id(fact_id)
        if category is not None:
            facts.check_category(category)
        content = facts.check_content(content, self.settings.max_entry_bytes)
        self._writable("facts")
        _old, new = self.store.supersede_fact(
            fact_id, category, content, self._now(), self._provenance()
        )
        return new

    def remove_fact(self, fact_id: int | str) -> Fact:
        fact_id = facts.check_id(fact_id)
        self._writable("facts")
        return self.store.remove_fact(fact_id, self._now())

    def get_fact(self, fact_id: int | str) -> Fact:
        fact_id = facts.check_id(fact_id)
        fact = self.store.get_fact(fact_id)
        if fact is None:
            raise NotFoundError(f"no fact with id {fact_id}: search for it with `memdir search`")
        return fact

    def fact_history(self, fact_id: int | str) -> list[Fact]:
        """F3: the whole supersede chain the fact belongs to, oldest first."""
        self.get_fact(fact_id)
        return self.store.fact_chain(facts.check_id(fact_id))

    # -- search (Q1, F4, P3) -----------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        category: str | None = None,
        limit: int = 10,
        since: str | None = None,
        kinds: tuple[str, ...] = ("fact", "procedure"),
    ) -> list[Hit]:
        if category is not None:
            facts.check_category(category)
        return search.search(
            self.store,
            self.layout,
            query,
            category=category,
            since=facts.normalize_since(since),
            limit=search.check_limit(limit),
            kinds=kinds,
        )

    # -- procedures (P) ----------------------------------------------------------------

    def write_procedure(self, name: str, content: str) -> Procedure:
        self.layout.procedure(name)  # validates the name before anything else
        facts.check_content(content, self.settings.max_entry_bytes, "procedure")
        self._writable("procedures")
        result = procedures.write(self.layout, name, content)
        self._count("procedures")
        return result

    def procedure(self, name: str) -> Procedure:
        return procedures.read(self.layout, name)

    def procedures(self) -> list[Procedure]:
        return procedures.list_all(self.layout)

    # -- sessions (U) ------------------------------------------------------------------

    def start_session(self, surface: str = "cli", parent: str | None = None) -> Session:
        """U1: a new session. With a parent it is a subagent session: read-only (U2)."""
        surface = sessions.check_surface(surface)
        if parent is not None:
            sessions.check_id(parent)
            if self.store.get_session(parent) is None:
                raise NotFoundError(f"unknown parent session {parent!r}: see `memdir sessions`")
        self._enabled("start a session")
        now = self.clock()
        return self.store.start_session(sessions.new_id(now), surface, parent, iso(now))

    def end_session(self, session_id: str) -> Session:
        """U3: record the end of a top-level session with the counts of what it wrote.
        A subagent's end is not recorded: it wrote nothing and keeps no record."""
        sessions.check_id(session_id)
        found = self.store.get_session(session_id)
        if found is None:
            raise NotFoundError(f"unknown session {session_id!r}: see `memdir sessions`")
        if found.is_subagent:
            return found
        if found.ended is not None:
            raise ConflictError(f"session {session_id} already ended at {found.ended}")
        self._enabled("end a session")
        return self.store.end_session(session_id, self._now())

    def sessions(self, limit: int = 100) -> list[Session]:
        return self.store.list_sessions(search.check_limit(limit))

    # -- internals ---------------------------------------------------------------------

    def _now(self) -> str:
        return iso(self.clock())

    def _provenance(self) -> Provenance:
        session = self.session
        surface = session.surface if session is not None else self.surface
        return Provenance(self.session_id, surface, self.agent)

    def _enabled(self, doing: str) -> None:
        if not self.settings.enabled:
            raise DisabledError(
                f"memory is disabled (memory.enabled = false in {self.layout.config}): "
                f"cannot {doing}; nothing was stored"
            )

    def _writable(self, what: str) -> None:
        """Every write passes here: memory enabled (S), a top-level session (U2) that is
        still open."""
        self._enabled(f"write {what}")
        session = self.session
        sessions.refuse_if_subagent(session)
        if session is not None and session.ended is not None:
            raise ConflictError(
                f"session {session.id} ended at {session.ended}: start a new one to write"
            )

    def _count(self, kind: str) -> None:
        if self.session_id:
            self.store.count_write(self.session_id, kind)


def open_memory(state_dir: str | None = None, **options: Any) -> Memory:
    return Memory(state_dir, **options)


class InitResult(Record):
    state_dir: str
    created: bool
    gitignore: str | None


def init_project(cwd: str | None = None) -> InitResult:
    """L1/L6: make `.memdir/` here, with a commented config, and keep its memory out of git."""
    cwd = os.getcwd() if cwd is None else cwd
    state_dir = os.path.join(cwd, PROJECT_DIR)
    created = not os.path.isdir(state_dir)
    files.ensure_dir(os.path.join(state_dir, "memory"))
    config = os.path.join(state_dir, "config.toml")
    if not os.path.exists(config):
        files.atomic_write(config, config_template())
    return InitResult(state_dir, created, _ignore_in_git(cwd))


def _ignore_in_git(cwd: str) -> str | None:
    """Append `.memdir/memory/` to ./.gitignore unless an equivalent line is there already.
    Only appends: the user's lines are never rewritten."""
    path = os.path.join(cwd, ".gitignore")
    line = f"{PROJECT_DIR}/memory/"
    current = files.read_text(path) or ""
    present = {x.strip().strip("/") for x in current.splitlines()}
    if {PROJECT_DIR, f"{PROJECT_DIR}/memory", line.strip("/")} & present:
        return None
    with open(path, "a", encoding="utf-8") as handle:
        if current and not current.endswith("\n"):
            handle.write("\n")
        handle.write(line + "\n")
    return path
