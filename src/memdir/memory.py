"""The Memory facade: the one library API that the CLI, the MCP server and the agent tools
call. It resolves where memory lives, who is writing (session, surface, agent), and whether
writing is allowed at all; the concept modules own the rules and the store owns the rows.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping

from . import (
    daily,
    distill,
    entries,
    facts,
    heartbeat,
    hot,
    identity,
    markers,
    procedures,
    recall,
    search,
    sessions,
    stats,
    tasks,
)
from .errors import ConflictError, DisabledError, MemdirError, NotFoundError, ValidationError
from .models import (
    Applied,
    Entry,
    Fact,
    Hit,
    HotWrite,
    Ingested,
    Note,
    Procedure,
    Provenance,
    Pruned,
    Recalled,
    Session,
    Task,
)
from .paths import (
    MEMORY_ENV,
    PROJECT_DIR,
    SESSION_ENV,
    STATE_ENV,
    Layout,
    resolve_memory_dir,
    resolve_state_dir,
    safe_path,
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

    # -- global entries (G) ------------------------------------------------------------

    def write_entry(
        self,
        name: str,
        description: str,
        content: str,
        *,
        task: str | None = None,
        workflow: str | None = None,
    ) -> Entry:
        """G2: create or update global/<name>.md (keeps `created`); MEMORY.md follows."""
        self.layout.entry(name)
        facts.check_content(content, self.settings.max_entry_bytes, "entry")
        self._writable("global entries")
        entry, _created = self._write_entry(name, description, content, task, workflow)
        return entry

    def _write_entry(
        self,
        name: str,
        description: str,
        content: str,
        task: str | None,
        workflow: str | None,
    ) -> tuple[Entry, bool]:
        provenance = {"agent": self.agent, "task": task, "workflow": workflow}
        result = entries.write(
            self.layout, self.store, name, description, content, self._now(), provenance
        )
        self._count("entries")
        return result

    def entry(self, name: str) -> Entry:
        return entries.read(self.layout, name)

    def entries(self) -> list[Entry]:
        """Every global entry (G5), by name; a broken one carries its error."""
        return entries.list_all(self.layout, self.store)

    def remove_entry(self, name: str) -> Entry:
        self.layout.entry(name)
        self._writable("global entries")
        return entries.remove(self.layout, self.store, name)

    def reindex(self) -> list[Entry]:
        """G3: rebuild MEMORY.md and the entry cache from the files."""
        self._enabled("rebuild the index")
        return entries.reindex(self.layout, self.store)

    # -- tasks (T) ---------------------------------------------------------------------

    def start_task(self, task_id: str, parent: str | None = None) -> Task:
        self.layout.task_notes(task_id)
        if parent is not None:
            self.layout.task_notes(parent)
        self._writable("tasks")
        return self.store.start_task(task_id, parent, self._now())

    def end_task(self, task_id: str, state: str = "done") -> Task:
        self.layout.task_notes(task_id)
        tasks.check_end_state(state)
        self._writable("tasks")
        return self.store.end_task(task_id, state, self._now())

    def task(self, task_id: str) -> Task:
        self.layout.task_notes(task_id)
        found = self.store.get_task(task_id)
        if found is None:
            raise NotFoundError(f"unknown task {task_id!r}: see `memdir task start`")
        return found

    def add_note(
        self,
        task_id: str,
        content: str,
        *,
        workflow: str | None = None,
        step: str | None = None,
    ) -> bool:
        """T1/T2: append a note to the task; False when it was there already (a retry)."""
        self.layout.task_notes(task_id)
        content = facts.check_content(content, self.settings.max_entry_bytes, "note")
        self._writable("task notes")
        added = tasks.add_note(
            self.layout, task_id, content, self._now(), workflow, step, self.agent
        )
        if added:
            self._count("notes")
        return added

    def notes(self, task_id: str, *, lineage: bool = False) -> list[Note]:
        """The task's notes; with lineage, then its parent's, grandparent's... (T3)."""
        self.layout.task_notes(task_id)
        chain = self._lineage(task_id) if lineage else [task_id]
        return [note for tid in chain for note in tasks.notes(self.layout, tid)]

    def prune(self, *, dry_run: bool = False) -> list[Pruned]:
        """T4: the retention sweep over task notes."""
        if not dry_run:
            self._writable("task notes")
        return tasks.prune(
            self.layout, self.store, self.clock(), self.settings.task_retention, dry_run
        )

    def _lineage(self, task_id: str) -> list[str]:
        return tasks.lineage({t.id: t for t in self.store.all_tasks()}, task_id)

    # -- markers and recall (M, R) -----------------------------------------------------

    def ingest(
        self,
        output: str,
        *,
        task: str | None = None,
        workflow: str | None = None,
        step: str | None = None,
        policy: object = None,
    ) -> Ingested:
        """M1-M6: apply the memorize blocks in an agent's output; return the output without
        them, what was applied and a warning per block that was not. Never raises for bad
        input: every problem becomes a warning."""
        parsed = markers.parse(output, self.settings.marker_prefix, self.settings.max_entry_bytes)
        warnings = list(parsed.warnings)
        try:
            step_policy = recall.policy_from(policy)
            refusal = self._memorize_refusal(step_policy)
        except MemdirError as exc:
            step_policy, refusal = recall.Policy(), str(exc)
        if refusal is not None:
            if parsed.requests:
                warnings.append(f"{refusal}: {len(parsed.requests)} memorize request(s) dropped")
            return Ingested(parsed.output, [], warnings)
        applied = []
        for request in parsed.requests:
            try:
                applied.append(self._apply(request, task, workflow, step))
            except (MemdirError, UnicodeEncodeError) as exc:  # a lone surrogate in --agent...
                warnings.append(f"memorize {request.scope} {request.name or task or ''}: {exc}")
        return Ingested(parsed.output, applied, warnings)

    def _memorize_refusal(self, policy: recall.Policy) -> str | None:
        if not self.settings.enabled:
            return "memory is disabled (memory.enabled = false)"
        if not policy.memorize:
            return "memorize is off for this step"
        if self.read_only:
            return "this is a read-only subagent session"
        return None

    def _apply(
        self,
        request: markers.Request,
        task: str | None,
        workflow: str | None,
        step: str | None,
    ) -> Applied:
        if request.scope == "global":
            assert request.name is not None and request.description is not None
            self._writable("global entries")
            _entry, created = self._write_entry(
                request.name, request.description, request.content, task, workflow
            )
            return Applied("global", request.name, "created" if created else "updated")
        if task is None:
            raise ValidationError("a task note needs the current task (--task ID)")
        added = self.add_note(task, request.content, workflow=workflow, step=step)
        return Applied("task", task, "noted" if added else "duplicate")

    def recall(
        self,
        *,
        task: str | None = None,
        policy: object = None,
        max_chars: int | None = None,
    ) -> Recalled:
        """R1-R4: HOT.md, then the long-term index, then the task's notes and its
        ancestors', the two sections within `max_chars` (default memory.max_inject_chars)."""
        step_policy = recall.policy_from(policy)
        budget = self.settings.max_inject_chars if max_chars is None else max_chars
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
            raise ValidationError(f"bad recall budget {budget!r}: a whole number of characters")
        if not self.settings.enabled:
            return Recalled("", 0, 0, 0, 0)
        if task is not None:
            self.layout.task_notes(task)
        wanted = "global" in step_policy.recall and step_policy.read
        listed = entries.index(self.layout, self.store) if wanted else []
        lineage = []
        if task is not None and "task" in step_policy.recall and step_policy.read:
            lineage = [(tid, tasks.notes(self.layout, tid)) for tid in self._lineage(task)]
        return recall.build(self.hot(), self.path, listed, lineage, budget, step_policy)

    # -- episodic memory, identity and boot (E) -----------------------------------------

    def daily_append(self, text: str, *, section: str | None = None) -> daily.DailyWrite:
        """E1: a timestamped entry in today's log (local time), under `## HH:MM` or `section`."""
        facts.check_content(text, self.settings.max_entry_bytes, "log entry")
        self._writable("the daily log")
        result = daily.append(self.layout, text, self.clock(), section)
        self._count("daily")
        return result

    def daily(self, date: str | None = None) -> str:
        """The log of `date` (YYYY-MM-DD, 'today' or 'yesterday'; default today)."""
        return self.daily_log(date)[1]

    def daily_log(self, date: str | None = None) -> tuple[str, str]:
        """(the local date as YYYY-MM-DD, its log): `date` as for daily()."""
        day = daily.resolve_date(date, self.clock())
        return day, daily.read(self.layout, day)

    def boot(self, *, subagent: bool | None = None) -> identity.Boot:
        """E3: the context a new session starts with. A subagent session (or subagent=True)
        gets the variant without the main-session-only parts (MEMORY.md)."""
        if subagent is None:
            subagent = self.read_only
        if not self.settings.enabled:
            return identity.Boot([], subagent)
        index = "".join(
            entries.index_line(name, description) + "\n"
            for name, description, _ in entries.index(self.layout, self.store)
        )
        return identity.boot(
            self.layout,
            self.settings.boot_files,
            self.settings.boot_main_only,
            self.clock(),
            subagent,
            index,
        )

    def get(self, path: str, *, from_line: int = 1, lines: int | None = None) -> Lines:
        """E4: exact lines of a file under the memory root, nothing outside it (X1)."""
        for value, what in ((from_line, "from_line"), (lines, "lines")):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ValidationError(f"bad {what} {value!r}: a whole number from 1")
        target = self._inside_root(path)
        rel = os.path.relpath(target, os.path.realpath(self.path))
        try:
            found, total = files.read_lines(target, from_line, lines)
        except FileNotFoundError:
            raise NotFoundError(f"no file {rel} under the memory root {self.path}") from None
        except IsADirectoryError:
            raise ValidationError(f"{rel} is a folder: give a file") from None
        except ValueError:
            raise ValidationError(f"{rel} is not a text file") from None
        return Lines(rel, from_line, [(from_line + i, t) for i, t in enumerate(found)], total)

    def _inside_root(self, path: str) -> str:
        root = os.path.realpath(self.path)
        if isinstance(path, str) and os.path.isabs(path):
            # an absolute path is fine when it resolves inside the root (as recall names it)
            real = os.path.realpath(path)
            if real == root or real.startswith(root + os.sep):
                return real
            raise ValidationError(f"path {path!r} points outside the memory root {self.path}")
        return safe_path(self.path, path)

    # -- heartbeat, distillation and stats (B, D) --------------------------------------

    def heartbeat_due(self) -> list[heartbeat.Check]:
        """B2: every known check with whether it is due; due ones first."""
        return heartbeat.checks(self.layout, dict(self.settings.heartbeat_hours), self.clock())

    def heartbeat_mark(self, check: str) -> heartbeat.Check:
        self._writable("the heartbeat state")
        hours = dict(self.settings.heartbeat_hours)
        return heartbeat.mark(self.layout, check, hours, self.clock())

    def distill(self, *, max_chars: int | None = None) -> distill.Distillation:
        """D1: what was logged since the last distillation, within the budget."""
        budget = self.settings.distill_max_chars if max_chars is None else max_chars
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 500:
            raise ValidationError(f"bad distill budget {budget!r}: at least 500 characters")
        gathered = distill.gather(self.layout, self.store, budget)
        if gathered.until is not None and self.settings.enabled and not self.read_only:
            self.store.set_value(distill.PENDING, distill.mark_of(gathered.items[-1]))
        return gathered

    def distill_done(self) -> str:
        """D1: move the watermark past what `distill` last handed out; returns it (UTC)."""
        self._writable("the distillation watermark")
        pending = self.store.get_value(distill.PENDING)
        mark = pending if pending is not None else str(self.clock())
        self.store.set_value(distill.WATERMARK, mark)
        return iso(distill.mark_time(mark))

    def stats(self) -> stats.Stats:
        """D2: number and size of every tier, HOT.md against its cap, distillation ratio."""
        return stats.collect(self.layout, self.store, self.hot(), self.settings.hot_cap_chars)

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


class Lines(Record):
    """E4: lines of one memory file, numbered from 1."""

    path: str
    from_line: int
    lines: list[tuple[int, str]]
    total: int

    @property
    def text(self) -> str:
        return "".join(line + "\n" for _, line in self.lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "from_line": self.from_line,
            "total_lines": self.total,
            "lines": [{"n": n, "text": text} for n, text in self.lines],
        }


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


def ingest_output(
    output: str,
    *,
    state_dir: str | None = None,
    session: str | None = None,
    agent: str | None = None,
    task: str | None = None,
    workflow: str | None = None,
    step: str | None = None,
    policy: object = None,
) -> Ingested:
    """M4 for front ends: memorize never fails its caller, not even when the store cannot
    be opened (a broken config.toml): the blocks are then stripped with the default prefix,
    and why nothing was stored is a warning."""
    try:
        memory = Memory(state_dir, session=session, agent=agent)
    except MemdirError as exc:
        parsed = markers.parse(output)
        warnings = [*parsed.warnings]
        if parsed.requests:
            warnings.append(f"{len(parsed.requests)} memorize request(s) dropped: {exc}")
        return Ingested(parsed.output, [], warnings)
    with memory:
        return memory.ingest(output, task=task, workflow=workflow, step=step, policy=policy)
