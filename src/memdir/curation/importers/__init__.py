"""Importers from other agents' memory (N4): `memdir import --from FORMAT PATH`.

Each format's module reads its source into a Plan (importers/plan.py) and writes nothing;
`run` then applies the plan through the public Memory API, so every rule of a normal write
holds: names (X1), the secret scan (X2), size caps (X3), read-only subagents (U2), the
duplicate guard (X5: an entry or procedure under a new name is stored, with a note naming
what it resembles; a fact that an active fact says exactly, case, Unicode form and spacing
aside, is skipped as a duplicate). Whole files memdir keeps as they are (daily logs,
identity files, the heartbeat state) are written after the same checks: the daily logs and
the heartbeat state through the memory root's documents (in team mode the scope's rows, W1),
the identity files (this machine's, in the state dir) atomically.

An item that cannot be imported (a secret, a bad name, too big, a malformed record, memory
that exists already) is skipped with its one-line reason: one bad item never stops the
rest, and nothing raises out of `run` for it. Existing memory is never overwritten
without `force`. With `dry_run` nothing at all is written (not even memory.db), and the
report lists what would be imported and what would be skipped, checked the same way.
"""

from __future__ import annotations

import contextlib
import os

from ...errors import MemdirError, ValidationError
from ...models import ImportItem, ImportReport
from ...similarity import normalize
from ...storage import files
from . import afk, claude_code, mcp_memory, mem0, openclaw
from .plan import EntryItem, FactRow, FileItem, HotItem, Plan, Planned, ProcedureItem

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType

    from ...memory import Memory

FORMATS: tuple[str, ...] = ("claude-code", "openclaw", "mcp-memory", "mem0", "afk")
READERS: dict[str, ModuleType] = {
    "claude-code": claude_code,
    "openclaw": openclaw,
    "mcp-memory": mcp_memory,
    "mem0": mem0,
    "afk": afk,
}
EXISTS = "exists (use --force to overwrite)"
SAME = "the store's copy holds exactly this already"
FULL_HOT = "imported-hot-md"
# what one item's write may raise; anything else is a bug and should be seen
ITEM_ERRORS = (MemdirError, OSError, ValueError)


def run(
    memory: Memory, fmt: str, path: str, *, dry_run: bool = False, force: bool = False
) -> ImportReport:
    """Import another agent's memory at `path`, given in format `fmt` (one of FORMATS)."""
    reader = READERS.get(fmt) if isinstance(fmt, str) else None
    if reader is None:
        raise ValidationError(f"unknown import format {fmt!r}: one of {', '.join(FORMATS)}")
    if not isinstance(path, str) or not path:
        raise ValidationError(f"give the path of the {fmt} memory: {reader.EXPECTED}")
    source = os.path.abspath(os.path.expanduser(path))
    if not os.path.exists(source):
        raise ValidationError(f"no such file or folder {path}: expected {reader.EXPECTED}")
    plan: Plan = reader.read(source)
    if not dry_run:
        # the facade's one gate (memory enabled, not a read-only subagent, session open):
        # refused once for the whole import rather than once per item
        memory.require_writable("imported memory")
    applier = _Applier(memory, plan, dry_run, force)
    # vectors come after, in one pass (`Memory.embed_pending`); in team mode the view is
    # refreshed once around the whole import, not before each file (Documents.bulk)
    with memory.bulk(), contextlib.nullcontext() if dry_run else memory.docs.bulk():
        for item in plan.items:
            applier.item(item)
        applier.facts(plan.facts)
    return ImportReport(fmt, source, dry_run, applier.imported, [*plan.skipped, *applier.skipped])


class _Applier:
    """Writes a plan's items one at a time (or, dry run, checks them), recording each."""

    def __init__(self, memory: Memory, plan: Plan, dry_run: bool, force: bool) -> None:
        self.memory, self.plan, self.dry_run, self.force = memory, plan, dry_run, force
        self.imported: list[ImportItem] = []
        self.skipped: list[ImportItem] = []
        self.note: str | None = None  # what the report should add about the item in hand

    def item(self, item: Planned) -> None:
        kind, target = _describe(item)
        self.note = None
        try:
            reason = self._apply(item)
        except ITEM_ERRORS as exc:
            reason = str(exc) or type(exc).__name__
        if reason is None:
            self.imported.append(ImportItem(kind, target, item.source, note=self.note))
        else:
            self.skipped.append(ImportItem(kind, target, item.source, reason))

    def _apply(self, item: Planned) -> str | None:
        """None when it was (or would be) imported, else why not."""
        if isinstance(item, EntryItem):
            return self._entry(item)
        if isinstance(item, ProcedureItem):
            return self._procedure(item)
        if isinstance(item, HotItem):
            return self._hot(item)
        return self._file(item)

    def _entry(self, item: EntryItem) -> str | None:
        from ... import entries, facts

        memory = self.memory
        path = memory.layout.entry(item.name)  # X1: validates the name
        entries.check_description(item.description)
        facts.check_content(item.content, memory.settings.max_entry_bytes, "entry")
        memory.refuse_secrets(
            "entry", text=item.content, name=item.name, description=item.description
        )
        if not self.force and os.path.exists(path):
            return EXISTS
        if self.dry_run:
            return None
        written = memory.write_entry(item.name, item.description, item.content)
        if written.duplicate:  # --force over an entry that holds exactly this: a no-op
            return SAME
        self.note = written.hint  # stored; what it resembles, if anything (X5)
        return None

    def _procedure(self, item: ProcedureItem) -> str | None:
        from ... import facts
        from ...storage import frontmatter

        memory = self.memory
        path = memory.layout.procedure(item.name)
        facts.check_content(item.content, memory.settings.max_entry_bytes, "procedure")
        memory.refuse_secrets("procedure", text=item.content, name=item.name)
        frontmatter.parse(item.content, item.source)  # a broken block is refused on write
        if not self.force and os.path.exists(path):
            return EXISTS
        if self.dry_run:
            return None
        written = memory.write_procedure(item.name, item.content)
        if written.duplicate:  # --force over a procedure that holds exactly this: a no-op
            return SAME
        self.note = written.hint
        return None

    def _hot(self, item: HotItem) -> str | None:
        """H3 never cuts silently: HOT.md over the cap is imported cut (the marker says so)
        and its whole text is kept in a global entry; if that entry cannot be written,
        HOT.md is not imported either, so nothing is lost."""
        memory = self.memory
        memory.refuse_secrets("hot memory text", text=item.text)
        if not self.force and memory.hot().strip():
            return EXISTS
        cap = memory.settings.hot_cap_chars
        if len(item.text) > cap:
            name = self.plan.unique_name(FULL_HOT)
            reason = None
            while os.path.exists(memory.layout.entry(name)):  # an earlier import's copy stays
                if _body_of_entry(memory, name) == item.text.strip("\n") + "\n":
                    break  # ... and is reused when it holds this very text
                name = self.plan.unique_name(FULL_HOT)
            else:
                copy = EntryItem(
                    name,
                    f"The whole HOT.md imported from {item.source} ({len(item.text):,} chars, "
                    f"over the {cap:,} cap)",
                    item.text,
                    item.source,
                )
                before = len(self.skipped)
                self.item(copy)
                reason = (self.skipped[-1].reason or "") if len(self.skipped) > before else None
            if reason is not None:
                return (
                    f"{len(item.text):,} chars, over the {cap:,} cap, and its whole text could "
                    f"not be kept in entry {name}: {reason}"
                )
            self.note = (
                f"{len(item.text):,} chars, over the {cap:,} cap: cut to fit, and the whole "
                f"text is kept in entry {name}"
            )
        if self.dry_run:
            return None
        memory.hot_set(item.text)
        return None

    def _file(self, item: FileItem) -> str | None:
        from ... import daily, heartbeat

        layout = self.memory.layout
        if item.kind == "daily":
            path, lock = daily.path_of(layout, item.key), f"daily-{item.key}"
            what = "daily log"
        elif item.kind == "identity":
            path, lock, what = os.path.join(layout.state_dir, item.key), None, "identity file"
        else:
            path, lock, what = heartbeat.state_path(layout), "heartbeat", "heartbeat state"
        self.memory.refuse_secrets(what, text=item.content, name=item.key)
        base = layout.state_dir if item.kind == "identity" else layout.memory_dir
        if not self.force and os.path.exists(path):
            return EXISTS
        if self.dry_run:
            return None
        if lock is None:  # an identity file: this machine's own, in the state dir
            files.atomic_write(path, item.content, root=base)
            return None
        held: list[str] = []

        def change(current: str | None) -> str | None:
            if current is not None and not self.force:  # written meanwhile: kept
                held.append(current)
                return current
            return item.content

        # through the documents (W1): the file under the lock its writers take, or in team
        # mode the stored row, rendered here and on every machine of the scope
        self.memory.docs.put(path, lock, change)
        return EXISTS if held else None

    def facts(self, rows: list[FactRow]) -> None:
        """F2-F5: check each fact, drop repeats of active facts, then write the rest in one
        transaction with their times and supersede chains (Memory.import_facts)."""
        from ... import facts

        memory = self.memory
        good: list[FactRow] = []
        for fact in rows:
            try:
                facts.check_category(fact.row.get("category"))
                content = facts.check_content(
                    fact.row.get("content"),  # type: ignore[arg-type]  # checked: a str or raises
                    memory.settings.max_entry_bytes,
                )
                memory.refuse_secrets(
                    "fact", text=content, **{k: v for k, v in fact.row.items() if k != "content"}
                )
            except ITEM_ERRORS as exc:
                self._skip_fact(fact, str(exc))
                continue
            row = {**fact.row, "content": content}
            row.setdefault("session_id", None)
            if row["session_id"] is None:
                row["session_id"] = memory.session_id
            good.append(fact._replace(row=row))
        good = self._without_repeats(good)
        if not good:
            return
        if self.dry_run:
            for fact in good:
                self._imported_fact(fact, "new fact")
            return
        try:
            mapping = memory.import_facts([fact.row for fact in good], fresh=True)
        except ITEM_ERRORS as exc:
            for fact in good:
                self._skip_fact(fact, str(exc))
            return
        for fact in good:
            self._imported_fact(fact, str(mapping[int(fact.row["id"])]))

    def _without_repeats(self, rows: list[FactRow]) -> list[FactRow]:
        """A chain (a fact and the versions it superseded) whose active fact says what an
        active fact of the archive, or an earlier one of this import, says already is left
        out whole: the archive holds it."""
        chains = _chains(rows)
        heads: dict[str, str] = {}
        dropped: set[int] = set()
        for head in rows:
            if head.row["status"] != "active":
                continue
            key = normalize(str(head.row["content"]))
            reason = self._existing_fact(str(head.row["content"]))
            if reason is None and key in heads:
                reason = f"duplicate of {heads[key]} earlier in the source"
            if reason is None:
                heads[key] = head.source
                continue
            members = chains[int(head.row["id"])]
            earlier = len(members) - 1
            if earlier:
                reason += f" (with its {earlier} earlier version(s))"
            dropped |= members
            for fact in rows:
                if int(fact.row["id"]) in members:
                    self._skip_fact(fact, reason)
        return [fact for fact in rows if int(fact.row["id"]) not in dropped]

    def _existing_fact(self, content: str) -> str | None:
        """'duplicate of fact N' when an active fact says the same (normalised). Never
        creates memory.db: without one there is nothing to repeat."""
        memory = self.memory
        try:
            if not memory.store.exists():
                return None
            found = memory.fact_saying(content)
        except MemdirError:
            return None  # the write itself will say what is wrong with the archive
        return None if found is None else f"duplicate of fact {found.id}"

    def _imported_fact(self, fact: FactRow, target: str) -> None:
        self.imported.append(ImportItem("fact", target, fact.source, note=fact.note))

    def _skip_fact(self, fact: FactRow, reason: str) -> None:
        self.skipped.append(ImportItem("fact", "", fact.source, reason))


def _body_of_entry(memory: Memory, name: str) -> str | None:
    try:
        return memory.entry(name).content
    except MemdirError:
        return None


def _chains(rows: list[FactRow]) -> dict[int, set[int]]:
    """Each fact's id -> the ids of its whole supersede chain (itself included)."""
    parent = {int(f.row["id"]): int(f.row["id"]) for f in rows}

    def root(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for f in rows:
        for link in (f.row.get("supersedes"), f.row.get("superseded_by")):
            if link is not None and int(link) in parent:
                parent[root(int(link))] = root(int(f.row["id"]))
    groups: dict[int, set[int]] = {}
    for fid in parent:
        groups.setdefault(root(fid), set()).add(fid)
    return {fid: groups[root(fid)] for fid in parent}


def _describe(item: Planned) -> tuple[str, str]:
    """(kind, target) of an item as the report shows it."""
    if isinstance(item, EntryItem):
        return "entry", item.name
    if isinstance(item, ProcedureItem):
        return "procedure", item.name
    if isinstance(item, HotItem):
        return "hot", "HOT.md"
    if item.kind == "daily":
        return "daily", f"daily/{item.key}.md"
    if item.kind == "identity":
        return "identity", item.key
    return "heartbeat", "heartbeat-state.json"


__all__ = ["FORMATS", "run"]
