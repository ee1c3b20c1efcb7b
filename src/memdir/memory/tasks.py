"""The Memory facade's task memory (T1-T4): the task registry, each task's notes and the
retention sweep."""

from __future__ import annotations

from .. import advice
from ..errors import NotFoundError
from ..lazy import lazy
from ..models import Note, Pruned, Task
from .base import MemoryBase, one_view

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .. import tasks
    from ..types import TaskState
else:
    tasks = lazy("memdir.tasks")


class TaskMemory(MemoryBase):
    """Tasks and their notes."""

    def start_task(self, task_id: str, parent: str | None = None) -> Task:
        self.layout.task_notes(task_id)
        if parent is not None:
            self.layout.task_notes(parent)
        self.require_writable("tasks")
        self.refuse_secrets("task", task_id=task_id, parent_task_id=parent)
        return self.store.start_task(task_id, parent, self._now())

    def end_task(self, task_id: str, state: TaskState = "done") -> Task:
        """End a task as done, failed or cancelled; its notes' retention starts (T3, T4)."""
        self.layout.task_notes(task_id)
        tasks.check_end_state(state)
        self.require_writable("tasks")
        return self.store.end_task(task_id, state, self._now())

    def task(self, task_id: str) -> Task:
        """A task, its state and lineage (T1); NotFoundError if there is none."""
        self.layout.task_notes(task_id)
        found = self.store.get_task(task_id)
        if found is None:
            raise NotFoundError(
                f"unknown task {task_id!r}: tasks are registered with {advice.task_start(task_id)}",
                kind="task",
                key=task_id,
            )
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
        return self._add_note(task_id, content, workflow, step)

    @one_view
    def notes(self, task_id: str, *, lineage: bool = False) -> list[Note]:
        """The task's notes; with lineage, then its parent's, grandparent's... (T3)."""
        self.layout.task_notes(task_id)
        chain = self._lineage(task_id) if lineage else [task_id]
        self.docs.refresh()
        return [note for tid in chain for note in tasks.notes(self.layout, tid)]

    @one_view
    def prune(self, *, dry_run: bool = False) -> list[Pruned]:
        """T4: the retention sweep over task notes."""
        if not dry_run:
            self.require_writable("task notes")
        retention = self.settings.task_retention
        if dry_run:
            self.docs.refresh()
            return tasks.prune(self.layout, self.store, self.clock(), retention, True)
        with self.docs.bulk():  # team mode: each removal a row, the view refreshed once
            return tasks.prune(self.layout, self.store, self.clock(), retention, False, self.docs)
