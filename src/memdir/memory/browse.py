"""The Memory facade's views for a person browsing memory (V): the timeline of writes,
the revision an edit is made from, a task's family."""

from __future__ import annotations

from .. import timeline as writes
from ..errors import MemdirError, StorageError, ValidationError
from ..lazy import lazy
from ..models import Task
from ..records import Record
from .base import MemoryBase, one_view

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .. import daily, entries, procedures, revisions, tasks
else:
    daily = lazy("memdir.daily")
    entries = lazy("memdir.entries")
    procedures = lazy("memdir.procedures")
    revisions = lazy("memdir.revisions")
    tasks = lazy("memdir.tasks")

TIMELINE_FACTS = 500  # the latest facts read for a timeline (each is one or two events)


class TaskFamily(Record):
    """T3 for a person: the task, its ancestors (nearest first) and its descendants."""

    task: Task | None  # None: notes exist for a task the registry does not know
    lineage: list[str]  # the task, its parent, grandparent...
    children: dict[str, list[Task]]  # a task id -> its child tasks, for the whole subtree


class BrowseMemory(MemoryBase):
    """What a memory browser shows that no other front end asks for."""

    @one_view
    def timeline(
        self,
        *,
        tier: str | None = None,
        session: str | None = None,
        agent: str | None = None,
        limit: int = 100,
    ) -> list[writes.Event]:
        """V2: what was written to memory, newest first, each write with the session,
        surface and agent its tier records; filtered by tier, session and agent."""
        if tier is not None and tier not in writes.TIERS:
            raise ValidationError(f"unknown tier {tier!r}: choose one of {', '.join(writes.TIERS)}")
        wanted = {tier} if tier else set(writes.TIERS)
        self.docs.refresh()
        if session is not None:
            wanted &= {"fact", "session"}  # the tiers that record their session
        events: list[writes.Event] = []
        try:
            if "fact" in wanted:
                events += writes.fact_events(self.store.recent_facts(TIMELINE_FACTS))
            if "session" in wanted:
                events += writes.session_events(self.store.list_sessions(limit))
        except StorageError:
            pass  # a broken or missing memory.db: the files still have a timeline
        if "entry" in wanted:
            events += writes.entry_events(entries.list_all(self.layout, self.store))
        if "procedure" in wanted:
            events += writes.procedure_events(procedures.list_all(self.layout))
        if "task" in wanted:
            events += writes.note_events(tasks.all_notes(self.layout))
        if "hot" in wanted:
            found = writes.file_event("hot", "HOT.md", self.layout.hot, "HOT.md changed")
            events += [found] if found else []
        if "daily" in wanted:
            events += self._daily_events()
        return writes.select(events, tier=tier, session=session, agent=agent, limit=limit)

    def _daily_events(self) -> list[writes.Event]:
        out = []
        for day in daily.dates(self.layout):
            path = daily.path_of(self.layout, day)
            found = writes.file_event("daily", day, path, f"log of {day}")
            out += [found] if found else []
        return out

    @one_view
    def daily_days(self) -> list[str]:
        """The days that have a log (YYYY-MM-DD), newest first."""
        self.docs.refresh()
        return daily.dates(self.layout)[::-1]

    def revision(self, kind: str, name: str | None = None) -> str:
        """V4: the revision of HOT.md (kind "hot"), an entry or a procedure (by `name`) as
        it is now, which an edit made from it hands back (`expected`) to be written."""
        from ..storage import files

        if kind == "hot":
            path = self.layout.hot
        elif kind == "entry" and name is not None:
            path = self.layout.entry(name)
        elif kind == "procedure" and name is not None:
            path = self.layout.procedure(name)
        else:
            raise ValidationError(
                f"no revision for {kind!r}: give hot, or entry or procedure with a name"
            )
        return revisions.of(files.read_text(path, root=self.path))

    def task_family(self, task_id: str) -> TaskFamily:
        """T3: the task with its ancestors and its whole subtree of child tasks."""
        self.layout.task_notes(task_id)
        try:
            registry = {t.id: t for t in self.store.all_tasks()}
        except MemdirError:
            registry = {}
        children: dict[str, list[Task]] = {}
        for t in registry.values():
            if t.parent_id is not None:
                children.setdefault(t.parent_id, []).append(t)
        subtree: dict[str, list[Task]] = {}
        todo = [task_id]
        while todo and len(subtree) < 1000:
            here = todo.pop()
            kids = sorted(children.get(here, []), key=lambda t: t.started)
            subtree[here] = kids
            todo += [k.id for k in kids if k.id not in subtree]
        return TaskFamily(registry.get(task_id), tasks.lineage(registry, task_id), subtree)
