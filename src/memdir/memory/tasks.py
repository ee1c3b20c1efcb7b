"""The Memory facade's task and global memory (G, T, M, R): global entries, task notes and
their registry, memorize markers and recall. Mixed into Memory."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence

from .. import advice, facts
from ..errors import MemdirError, NotFoundError, StorageError, ValidationError
from ..lazy import lazy
from ..models import Applied, Entry, Ingested, Note, Pruned, Recalled, Similar, Task
from ..paths import shown_path
from ..records import Record
from ..storage import embeddings
from .base import MemoryBase

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .. import duplicates, entries, hot, markers, recall, tasks
    from ..search import index, vectors
else:
    vectors = lazy("memdir.search.vectors")
    duplicates = lazy("memdir.duplicates")
    entries = lazy("memdir.entries")
    hot = lazy("memdir.hot")
    index = lazy("memdir.search.index")
    markers = lazy("memdir.markers")
    recall = lazy("memdir.recall")
    tasks = lazy("memdir.tasks")


class Reindexed(Record):
    """What `reindex` rebuilt: the entries (broken ones carry their error), the files
    chunked, the items embedded."""

    entries: list[Entry]
    files: int
    embedded: int


class WorkflowMemory(MemoryBase):
    def write_entry(
        self,
        name: str,
        description: str,
        content: str,
        *,
        task: str | None = None,
        workflow: str | None = None,
    ) -> Entry:
        """G2: create or update global/<name>.md (keeps `created`); MEMORY.md follows.
        The name is the identity (X5): a write that repeats the entry exactly (same
        description and body) changes nothing and answers it with `duplicate` set; other
        entries with the same or a near body are named in `similar`, never refused."""
        self.layout.entry(name)
        facts.check_content(content, self.settings.max_entry_bytes, "entry")
        self.require_writable("global entries")
        entry, _created = self._write_entry(name, description, content, task, workflow)
        return entry

    def _entry_twins(self, name: str, content: str) -> tuple[Similar, ...]:
        """The other entries that say this or nearly this. Only entries whose cached
        fingerprint could match (the body's key, shared band keys) are read."""
        prints = entries.fingerprints(self.layout, self.store)
        others = []
        for other in duplicates.candidates(name, content, prints):
            with contextlib.suppress(MemdirError):  # a symlink out of the root (X1)
                text = entries.text_of(self.layout, other) or ""
                others.append((other, duplicates.body_of(text)))
        return duplicates.among("entry", name, content, others, self.settings.duplicate_lexical)

    def _write_entry(
        self,
        name: str,
        description: str,
        content: str,
        task: str | None,
        workflow: str | None,
    ) -> tuple[Entry, bool]:
        # the content's size was checked by the caller; X2 here, over every stored field
        self.refuse_secrets(
            "entry", text=content, name=name, description=description, task=task, workflow=workflow
        )
        provenance = {"agent": self.agent, "task": task, "workflow": workflow}
        entry, created = entries.write(
            self.layout,
            self.store,
            name,
            description,
            content,
            self._now(),
            provenance,
            twins=lambda: self._entry_twins(name, content),
        )
        if entry.duplicate:
            same = duplicates.named_hint("entry", entry.name, self.settings.marker_prefix)
            return entry._replace(hint=same), False
        self._count("entries")
        self._embed_written(files=[self.layout.entry(name)])
        similar = duplicates.merged(entry.similar, self._similar_files("global", name, content))
        hint = duplicates.similar_hint(similar, name, self.settings.marker_prefix)
        return entry._replace(similar=similar, hint=hint), created

    def _similar_files(self, kind: str, name: str, content: str) -> tuple[Similar, ...]:
        """Entries or procedures that mean nearly this, when the embedding model is loaded
        (a report: never fails the write)."""
        if self._embedder is None:
            return ()
        semantic = (self._embedder, self.settings.duplicate_semantic, self._vectors)
        try:
            return duplicates.similar_files(self.store, kind, name, content, semantic)
        except MemdirError:
            return ()

    def entry(self, name: str) -> Entry:
        return entries.read(self.layout, name)

    def entries(self) -> list[Entry]:
        """Every global entry (G5), by name; a broken one carries its error."""
        return entries.list_all(self.layout, self.store)

    def remove_entry(self, name: str) -> Entry:
        self.layout.entry(name)
        self.require_writable("global entries")
        return entries.remove(self.layout, self.store, name)

    def reindex(self, progress: Callable[[str, int, int], None] | None = None) -> Reindexed:
        """G3, Q3: rebuild MEMORY.md, the entry cache and the search index from the files,
        and embed everything not embedded yet (when the extra is installed). `progress`
        is told (stage, done, total) as it goes."""
        self._enabled("rebuild the index")
        found = entries.reindex(self.layout, self.store)
        step = None if progress is None else (lambda d, t: progress("chunks", d, t))
        files = index.sync(self.layout, self.store, full=True, progress=step)
        embed = None if progress is None else (lambda d, t: progress("embeddings", d, t))
        return Reindexed(found, files, self.embed_pending(embed))

    def embed_pending(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Issue 11: give a vector to every fact and file section that has none yet (what
        `memdir reindex` and `memdir import` end with); `progress` is told (done, total)
        from the first item on. 0 when search here does not use vectors ([search] mode
        lexical, or no embeddings extra). Returns how many items were embedded."""
        if not self._wants_vectors():
            return 0
        self._enabled("embed memory")
        self.sync_index()
        embedder = self._embedder or embeddings.default_embedder()
        self._embedder = embedder
        return vectors.embed_pending(self.store, embedder, progress)

    def sync_index(self) -> None:
        """Bring the chunk index up to date with the files (cheap when nothing changed).
        The files too big to index are remembered for the search's note (issue 12)."""
        if self.settings.enabled:
            self.too_big = []
            index.sync(self.layout, self.store, too_big=self.too_big)

    def start_task(self, task_id: str, parent: str | None = None) -> Task:
        self.layout.task_notes(task_id)
        if parent is not None:
            self.layout.task_notes(parent)
        self.require_writable("tasks")
        self.refuse_secrets("task", task_id=task_id, parent_task_id=parent)
        return self.store.start_task(task_id, parent, self._now())

    def end_task(self, task_id: str, state: str = "done") -> Task:
        self.layout.task_notes(task_id)
        tasks.check_end_state(state)
        self.require_writable("tasks")
        return self.store.end_task(task_id, state, self._now())

    def task(self, task_id: str) -> Task:
        self.layout.task_notes(task_id)
        found = self.store.get_task(task_id)
        if found is None:
            raise NotFoundError(
                f"unknown task {task_id!r}: tasks are registered with {advice.task_start(task_id)}"
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
        self.layout.task_notes(task_id)
        content = facts.check_content(content, self.settings.max_entry_bytes, "note")
        self.require_writable("task notes")
        self.refuse_secrets("note", text=content, task_id=task_id, workflow=workflow, step=step)
        added = tasks.add_note(
            self.layout, task_id, content, self._now(), workflow, step, self.agent
        )
        if added:
            self._count("notes")
            self._embed_written(files=[self.layout.task_notes(task_id)])
        return added

    def notes(self, task_id: str, *, lineage: bool = False) -> list[Note]:
        """The task's notes; with lineage, then its parent's, grandparent's... (T3)."""
        self.layout.task_notes(task_id)
        chain = self._lineage(task_id) if lineage else [task_id]
        return [note for tid in chain for note in tasks.notes(self.layout, tid)]

    def prune(self, *, dry_run: bool = False) -> list[Pruned]:
        """T4: the retention sweep over task notes."""
        if not dry_run:
            self.require_writable("task notes")
        return tasks.prune(
            self.layout, self.store, self.clock(), self.settings.task_retention, dry_run
        )

    def _lineage(self, task_id: str) -> list[str]:
        try:
            registry = {t.id: t for t in self.store.all_tasks()}
        except StorageError:
            registry = {}  # a broken memory.db: the task's own notes still recall (Z)
        return tasks.lineage(registry, task_id)

    def ingest(
        self,
        output: str,
        *,
        task: str | None = None,
        workflow: str | None = None,
        step: str | None = None,
        policy: object = None,
        blocks: Sequence[object] | None = None,
    ) -> Ingested:
        """M1-M6: apply the memorize blocks in an agent's output, and `blocks` given as
        data (the memorize tool's structured form: no marker needed); return the output
        without them, what was applied and a warning per block that was not. Never raises
        for bad input: every problem becomes a warning."""
        parsed = markers.parse(output, self.settings.marker_prefix, self.settings.max_entry_bytes)
        warnings = list(parsed.warnings)
        if blocks:
            given, refused = markers.requests_from(blocks, self.settings.max_entry_bytes)
            parsed = parsed._replace(requests=[*parsed.requests, *given])
            warnings += refused
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
        with self.bulk():  # issue 12: the blocks first, then one embedding pass for all
            for request in parsed.requests:
                try:
                    applied.append(self._apply(request, task, workflow, step))
                except (MemdirError, UnicodeEncodeError) as exc:  # a lone surrogate in --agent
                    named = shown_path(request.name or task or "")  # shown escaped (X1)
                    warnings.append(f"memorize {request.scope} {named}: {exc}")
        written = {
            self.layout.entry(a.target) if a.scope == "global" else self.layout.task_notes(a.target)
            for a in applied
            if a.action not in ("unchanged", "duplicate")
        }
        if written:
            self._embed_written(files=sorted(written))
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
            self.require_writable("global entries")
            facts.check_content(request.content, self.settings.max_entry_bytes, "entry")
            entry, created = self._write_entry(
                request.name, request.description, request.content, task, workflow
            )
            if entry.duplicate:
                return Applied("global", entry.name, "unchanged", entry.hint)
            action = "created" if created else "updated"
            return Applied("global", request.name, action, entry.hint, entry.similar)
        if task is None:
            raise ValidationError(
                f"a task note needs the current task: {advice.memorize_with_task()}"
            )
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
        from ..numbers import MAX_CHARS, check_int

        check_int(budget, "recall budget (characters)", low=0, high=MAX_CHARS)
        if not self.settings.enabled:
            return Recalled("", 0, 0, 0, 0)
        if task is not None:
            self.layout.task_notes(task)
        wanted = "global" in step_policy.recall and step_policy.read
        listed = entries.index(self.layout, self.store) if wanted else []
        lineage = []
        if task is not None and "task" in step_policy.recall and step_policy.read:
            lineage = [(tid, tasks.notes(self.layout, tid)) for tid in self._lineage(task)]
        shown = hot.shown(hot.read(self.layout), self.settings.hot_cap_chars)
        return recall.build(shown, self.path, listed, lineage, budget, step_policy)
