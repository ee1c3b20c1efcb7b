"""The Memory facade's agent loop: memorize (M1-M6: the blocks in an agent's output),
recall (R1-R4) and boot (B), the heartbeat checks (D) and distillation (D1)."""

from __future__ import annotations

from collections.abc import Sequence

from .. import advice, facts
from ..clock import iso
from ..errors import MemdirError, ValidationError
from ..lazy import lazy
from ..models import Applied, Ingested, Recalled
from ..paths import shown_path
from ..storage import open_store
from .base import MemoryBase, one_view

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .. import distill, entries, heartbeat, hot, identity, markers, recall, tasks
    from ..search import index
else:
    distill = lazy("memdir.distill")
    entries = lazy("memdir.entries")
    heartbeat = lazy("memdir.heartbeat")
    hot = lazy("memdir.hot")
    identity = lazy("memdir.identity")
    markers = lazy("memdir.markers")
    recall = lazy("memdir.recall")
    tasks = lazy("memdir.tasks")
    index = lazy("memdir.search.index")


class AgentMemory(MemoryBase):
    """What an agent's turn calls: boot and recall before, memorize after, the
    heartbeat and distillation between."""

    _log_untasked = False  # inside ingest_once: a host's answer, which has no memdir task

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
        with self.bulk():  # Q2: the blocks first, then one embedding pass for all
            for request in parsed.requests:
                try:
                    applied.append(self._apply(request, task, workflow, step))
                except (MemdirError, UnicodeEncodeError) as exc:  # a lone surrogate in --agent
                    named = shown_path(request.name or task or "")  # shown escaped (X1)
                    warnings.append(f"memorize {request.scope} {named}: {exc}")
        written = {
            self.layout.entry(a.target) if a.scope == "global" else self.layout.task_notes(a.target)
            for a in applied
            if a.action not in ("unchanged", "duplicate", "logged")  # logged: embedded there
        }
        if written:
            self._embed_written(files=sorted(written))
        return Ingested(parsed.output, applied, warnings)

    def ingest_once(self, output: str, key: str) -> Ingested | None:
        """M4 for an answer a host may hand over more than once (its Stop event fires per
        turn, and a hook registered twice runs twice at once): the blocks of `output` are
        applied the first time `key` is seen, None every later time. A host's session has no
        memdir task: a task block goes to today's daily log instead. Marked after the
        blocks are applied, under a lock, so two processes apply them once between them
        and a process killed between the two lets the next one apply them again (an
        entry written twice is `unchanged`)."""
        from hashlib import sha256

        from ..storage import files

        digest = sha256(f"{key}\0{output}".encode("utf-8", "surrogatepass")).hexdigest()[:32]
        mark = f"ingested:{digest}"
        with files.locked(self.layout.locks_dir, "ingest-once"):  # rare: answers with blocks
            if self.store.get_value(mark) is not None:
                return None
            self._log_untasked = True
            try:
                ingested = self.ingest(output)
            finally:
                self._log_untasked = False
            if ingested.applied:  # nothing applied (refused, dropped): nothing to repeat
                self.store.set_value(mark, self._now())
        return ingested

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
        if task is None and self._log_untasked:
            # a host's session has no memdir task: the note is today's, not lost (M3)
            written = self._log(request.content)
            return Applied("task", written.path, "logged")
        if task is None:
            raise ValidationError(
                f"a task note needs the current task: {advice.memorize_with_task()}"
            )
        added = self._add_note(task, request.content, workflow, step)
        return Applied("task", task, "noted" if added else "duplicate")

    @one_view
    def recall(
        self,
        *,
        task: str | None = None,
        policy: object = None,
        max_chars: int | None = None,
    ) -> Recalled:
        """R1-R4: HOT.md, then the long-term index, then the task's notes and its
        ancestors', the two sections within `max_chars` (default memory.max_inject_chars)."""
        self.docs.refresh()  # team mode: the view of the stored tiers brought up to date
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
        shown = hot.shown(hot.read(self.layout, self.docs), self.settings.hot_cap_chars)
        return recall.build(shown, self.path, listed, lineage, budget, step_policy)

    def warm(self) -> None:
        """Ready what the next recall, boot or session hook lists and what a search syncs,
        writing nothing: the fork server does it for its next calls while none runs (C1),
        through a look of its own: a connection left open would keep the store's WAL from
        being folded by the last close. A search index the files have moved on from is
        left to the call, unread (a look writes no chunk). Local stores only (team mode's
        view is brought up to date by each call). StorageError where the store cannot be
        looked at without making a file in it (no WAL: every connection closed; or the
        store went away meanwhile)."""
        if self.docs.shared:
            return
        # its close folds no WAL: a forked call leaves it for the next (C1)
        look = open_store(self.layout, self.settings, read_only=True, leave_wal=True)
        try:
            look.schema_version()  # opened first: a look that cannot be had readies nothing
            entries.warm(self.layout, look)
            if self.settings.enabled:
                index.ready(self.layout, look)
        finally:
            look.close()

    @one_view
    def boot(self, *, subagent: bool | None = None) -> identity.Boot:
        """E3: the context a new session starts with. A subagent session (or subagent=True)
        gets the variant without the main-session-only parts (MEMORY.md)."""
        if subagent is None:
            subagent = self.read_only
        if not self.settings.enabled:
            return identity.Boot([], subagent)
        self.docs.refresh()
        files, main_only = self.settings.boot_files, self.settings.boot_main_only
        shows_index = "MEMORY.md" in files and not (subagent and "MEMORY.md" in main_only)
        index = (
            "".join(
                entries.index_line(name, description) + "\n"
                for name, description, _ in entries.index(self.layout, self.store)
            )
            if shows_index
            else ""
        )
        return identity.boot(
            self.layout,
            files,
            main_only,
            self.clock(),
            subagent,
            index,
            self.settings.hot_cap_chars,
        )

    def heartbeat_due(self) -> list[heartbeat.Check]:
        """B2: the checks that are due now (never done, or their threshold has passed)."""
        return [check for check in self.heartbeat_status() if check.due]

    @one_view
    def heartbeat_status(self) -> list[heartbeat.Check]:
        """B2: every known check (configured or in the state file), with its last run and
        when it is next due; due ones first."""
        self.docs.refresh()
        return heartbeat.checks(self.layout, dict(self.settings.heartbeat_hours), self.clock())

    def heartbeat_mark(self, check: str) -> heartbeat.Check:
        """Record that `check` was done now (B1, B2)."""
        self.require_writable("the heartbeat state")
        self.refuse_secrets("heartbeat check", name=check)
        hours = dict(self.settings.heartbeat_hours)
        return heartbeat.mark(self.layout, check, hours, self.clock(), self.docs)

    @one_view
    def distill(self, *, max_chars: int | None = None) -> distill.Distillation:
        """D1: what was logged since the last distillation, within the budget."""
        budget = self.settings.distill_max_chars if max_chars is None else max_chars
        from ..numbers import MAX_CHARS, check_int

        check_int(budget, "distill budget (characters)", low=500, high=MAX_CHARS)
        self.docs.refresh()
        gathered = distill.gather(self.layout, self.store, budget)
        if gathered.until is not None and self.settings.enabled and not self.read_only:
            self.store.set_value(distill.PENDING, distill.mark_of(gathered.items[-1]))
        return gathered

    def distill_done(self) -> str:
        """D1: move the watermark past what `distill` last handed out; returns it (UTC)."""
        self.require_writable("the distillation watermark")
        pending = self.store.get_value(distill.PENDING)
        mark = pending if pending is not None else str(self.clock())
        self.store.set_value(distill.WATERMARK, mark)
        return iso(distill.mark_time(mark))
