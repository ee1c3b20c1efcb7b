"""The documents of a memory root: the markdown tiers (HOT.md, ...) as a concept module
reads and rewrites them, whichever the truth is.

Local (memory.db, the default): the files are the truth; a change is a read-modify-write of
the file under its lock, written atomically, as before.

Team (a PostgreSQL store): the rows are the truth (postgres/documents.py), and the memory
root holds a rendered view of them. A change is applied to the stored row in one locked
transaction (the rules a concept module checks, HOT.md's cap say, see what is stored), then
the file is rendered atomically. Before a read the view is refreshed: the scope's change
counter against the one last rendered (one small query when nothing changed), and the rows
written since rendered. A file that differs from what was last rendered there is a hand edit:
it goes back through the same write with the rendered revision as the expected one; when the
row moved meanwhile, the row's version is rendered and the hand edit kept as a conflict
(`memdir doctor` reports it). The hand edit is also written beside the file, as
`<file>.conflict-<id>`: merge what is wanted of it into the file, delete it, and the next
refresh drops the kept conflict. What was last rendered is recorded in `.view.json` in the
memory root (revision, hash and stat per file, the conflict files written), written
atomically under the view's lock, which is waited for at most memory.busy_timeout_ms. A
rendered file's mtime is its row's (settle_mtime): the caches the machines of a scope share
key a file by its (mtime, size), and agree. A library call refreshes the view once
(operation()). Moving a memory root to rows and back: carry.py.

A writer of many documents at once (an import, the retention sweep) writes inside `bulk()`:
the view is refreshed once before and once after, each change in between looks at its own
file only, and what `put()` and `remove()` stored is rendered by the refresh that ends it.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterator

from ..errors import StorageError, ValidationError
from . import files
from .hashing import body_hash

TYPE_CHECKING = False  # json, threading and typing load on team mode's first use only:
if TYPE_CHECKING:  # the CLI's read paths import this module (test_cli checks what loads)
    from typing import Any, Protocol, TypeGuard

    from .postgres.documents import (
        DocumentConflict,
        DocumentWrite,
        KnownDocument,
        StoredDocument,
    )

    class DocumentStore(Protocol):
        """What a store that keeps documents as rows offers (PostgresStore)."""

        read_only: bool
        busy_timeout_ms: int  # how long the view's lock is waited for, as the scope's

        def exists(self) -> bool: ...

        def document_revision(self) -> int: ...

        def documents_since(self, revision: int) -> list[StoredDocument]: ...

        def documents_known(self, paths: list[str]) -> dict[str, KnownDocument]: ...

        def change_document(
            self,
            path: str,
            change: Callable[[str | None], str | None],
            *,
            now: str,
            by: str,
            expected: int | None = None,
        ) -> DocumentWrite: ...

        def document_conflicts(self) -> list[DocumentConflict]: ...

        def settle_conflict(self, conflict_id: int) -> bool: ...


def keeps_documents(store: object) -> TypeGuard[DocumentStore]:
    """Whether `store` keeps the markdown tiers as rows (team mode: PostgresStore)."""
    return callable(getattr(store, "change_document", None))


VIEW_STATE = ".view.json"
_THREAD: Any = None  # threading.local: the views this thread holds the lock of


def _thread() -> Any:
    global _THREAD
    if _THREAD is None:
        import threading

        _THREAD = threading.local()
    return _THREAD


def _views() -> dict[str, dict[str, object]]:
    """root -> state of the views whose lock this thread holds."""
    held: dict[str, dict[str, object]] = _thread().__dict__.setdefault("views", {})
    return held


def _bulks() -> dict[str, int]:
    """root -> how deep in bulk() this thread is (another thread's writes are its own)."""
    depth: dict[str, int] = _thread().__dict__.setdefault("bulks", {})
    return depth


CONFLICT_RE = re.compile(r"\.md\.conflict-[0-9]+\Z")  # a kept hand edit beside its file
# the documents that are rows in team mode, whose hand edits are looked for: these files of
# the memory root, and the .md files of these folders (global/ and MEMORY.md: not yet)
WATCHED_FILES = ("HOT.md", "heartbeat-state.json")
WATCHED_DIRS = ("daily", "global", "procedures", "tasks")
DERIVED = "global/"  # rendering a file here makes MEMORY.md stale (derived on each machine)


def is_document(rel: str) -> bool:
    """Whether the memory root's file `rel` ("daily/2026-01-02.md") is one of the documents
    (in team mode a row); the rest of the root (HOT.md.bak, HOT.overflow.md, MEMORY.md,
    anything else put there) stays a file of the machine."""
    if rel in WATCHED_FILES:
        return True
    folder, _, name = rel.partition("/")
    return (
        folder in WATCHED_DIRS
        and "/" not in name
        and name.endswith(".md")
        and not name.startswith(files.TEMP_PREFIX)
    )


class Documents:
    """Local: the files are the truth."""

    shared = False

    def __init__(self, memory_dir: str) -> None:
        self.root = memory_dir
        # called, outside every lock, once files MEMORY.md derives from were rendered
        self.after_render: Callable[[], None] | None = None

    def rel(self, path: str) -> str:
        return os.path.relpath(path, self.root).replace(os.sep, "/")

    def refresh(self) -> None:
        """Bring the view up to date (nothing to do: the files are the truth)."""

    def operation(self) -> contextlib.AbstractContextManager[None]:
        """One call of the library, refreshing the view at most once (TeamDocuments)."""
        return contextlib.nullcontext()

    def files_changed(self) -> None:
        """The call changed files of the view by other means than change()."""

    def read(self, path: str) -> str | None:
        return files.read_text(path, root=self.root)

    def change(
        self,
        path: str,
        lock: str | None,
        change: Callable[[str | None], str | None],
        now: str = "",
    ) -> str | None:
        """Read-modify-write `path` under the lock `lock` (None: the caller holds the lock
        every writer of `path` takes): `change` gets the current text (None: no file) and
        returns the new one (None: remove the file)."""
        with self._locked(lock):
            current = files.read_for_rewrite(path, root=self.root)
            new = change(current)
            if new != current:
                self._put(path, new)
            return new

    def put(
        self,
        path: str,
        lock: str | None,
        change: Callable[[str | None], str | None],
        at: float | None = None,
    ) -> None:
        """change() for a writer that reads nothing of the file after it (see TeamDocuments).
        `at`: the time the text is from (an archive's file time), which a row keeps; here the
        caller gives the file its time."""
        self.change(path, lock, change)

    def remove(self, path: str, lock: str | None) -> bool:
        """Delete `path` (a change to None that need not read the file: one that is not
        text goes too, as a plain unlink did); False when there was nothing to delete."""
        with self._locked(lock):
            try:
                files.unlink(path, root=self.root)
            except FileNotFoundError:
                return False
            return True

    @contextlib.contextmanager
    def bulk(self) -> Iterator[None]:
        """Many changes in a row (an import): locally nothing differs; see TeamDocuments."""
        yield

    def _locked(self, lock: str | None) -> contextlib.AbstractContextManager[None]:
        if lock is None:
            return contextlib.nullcontext()
        return files.locked(os.path.join(self.root, ".locks"), lock)

    def _put(self, path: str, text: str | None) -> None:
        files.sweep_temps(path, root=self.root)
        if text is None:
            with contextlib.suppress(FileNotFoundError):
                files.unlink(path, root=self.root)
        else:
            files.atomic_write(path, text, root=self.root)

    def conflicts(self) -> list[DocumentConflict]:
        return []


class TeamDocuments(Documents):
    """Team: the rows are the truth, the files a rendered view of them."""

    shared = True

    def __init__(self, memory_dir: str, store: DocumentStore) -> None:
        super().__init__(memory_dir)
        self.store = store
        import socket

        self.by = f"{socket.gethostname()}:{memory_dir}"
        # thread id -> whether the view was refreshed in the operation that thread is in
        # (operation()): one refresh an operation, not one a read inside it
        self._operations: dict[int, bool] = {}

    @contextlib.contextmanager
    def operation(self) -> Iterator[None]:
        """One call of the library: the view is refreshed once inside it, at its first read,
        not at every read the call makes (recall reads HOT.md, the entries, the notes). Its
        own writes render what they wrote; what it changes in the files by other means it
        says with files_changed(), and the next read refreshes again."""
        import threading

        me = threading.get_ident()
        if me in self._operations:
            yield  # the outer one holds it
            return
        self._operations[me] = False
        try:
            yield
        finally:
            del self._operations[me]

    def files_changed(self) -> None:
        """Files of the view were changed by this call other than through change(): the next
        refresh of the operation looks again."""
        import threading

        me = threading.get_ident()
        if me in self._operations:
            self._operations[me] = False

    def refresh(self) -> None:
        import threading

        me = threading.get_ident()
        if self._operations.get(me):
            return  # refreshed already in this operation
        if self.store.read_only or not self.store.exists() or not _writable(self.root):
            # a look (doctor) renders and pushes nothing; a read never creates the scope
            # (a hand edit made before it exists goes in with the first write); a view that
            # cannot be written (a read-only mount, Z) is read as it stands
            return
        inside = self.root in _views()
        with self._view() as state:
            # inside a change (its rules reading the tiers, inside its transaction): what
            # was stored is rendered, but no hand edit is pushed there (a push would be part
            # of the change's transaction, and undone with it if the change is refused)
            self._refresh(state, push=not inside)
            token = state.get("derive")
        if inside:
            # a change's own rules reading the tiers, the view's lock (and the scope's)
            # held by the change around it: deriving here would take the entries' lock
            # inside the view's, the reverse of entries.write's order (entries, then view),
            # and two writers would wait on each other for ever. The flag stays set: the
            # next refresh outside a change derives.
            return
        if me in self._operations:
            self._operations[me] = True
        if token and self.after_render is not None:
            self.after_render()  # outside the view's lock: it takes the entries' lock
            with self._view() as state:
                # cleared only if no render set it again since it was read: another
                # process may have rendered global/ while this one derived
                if state.get("derive") == token:
                    state.pop("derive", None)

    def read(self, path: str) -> str | None:
        self.refresh()
        return super().read(path)

    def change(
        self,
        path: str,
        lock: str | None,
        change: Callable[[str | None], str | None],
        now: str = "",
    ) -> str | None:
        return self._change(path, change, now, removing=False, later=False)

    def put(
        self,
        path: str,
        lock: str | None,
        change: Callable[[str | None], str | None],
        at: float | None = None,
    ) -> None:
        """change() for a writer that reads nothing of the file after it: inside bulk() the
        file is rendered when the bulk write ends, with the others, in one pass. `at`: the
        time the text is from (an archive's file time), kept as the row's updated_at, so
        every view's file has it (to the second, settle_mtime); None: now."""
        self._change(path, change, "" if at is None else _stamp(at), removing=False, later=True)

    def remove(self, path: str, lock: str | None) -> bool:
        """The stored row deleted (a row with no body, so every view drops the file) and
        the file here (inside bulk(), when it ends); a file that is not text, never a row,
        goes at once, as it would locally."""
        had: list[bool] = []

        def gone(current: str | None) -> None:
            had.append(current is not None)

        self._change(path, gone, "", removing=True, later=True)
        return any(had)

    @contextlib.contextmanager
    def bulk(self) -> Iterator[None]:
        """Many changes in a row (an import of hundreds of files): the view is refreshed
        once before and once after, and each change in between looks at its own file only
        (a hand edit of it goes in first, as always) instead of at every file of the view.
        Rows other machines write meanwhile, and hand edits of other files, are taken by
        the refresh at the end, which also renders what put() and remove() stored (one
        pass: the view's state saved once, not once a file). No lock is held across: a
        writer of the same machine interleaves as it would between two separate writes."""
        self.refresh()
        depth = _bulks()
        depth[self.root] = depth.get(self.root, 0) + 1
        try:
            yield
        finally:
            depth[self.root] -= 1
        self.files_changed()  # the refresh of the call (operation()) is to look again
        self.refresh()

    def _change(
        self,
        path: str,
        change: Callable[[str | None], str | None],
        now: str,
        *,
        removing: bool,
        later: bool,
    ) -> str | None:
        bulk = _bulks().get(self.root, 0) > 0  # inside bulk(): only this file looked at
        with self._view() as state:
            rel = self.rel(path)
            if bulk:
                held = self._refresh_one(state, rel)
            else:
                held = self._refresh(state)  # a hand edit goes in first: the change is on it
            if rel in held and not removing:
                _text_of(path, self.root)  # refused as on SQLite: the file is left as it is

            def written_first(current: str | None) -> str | None:
                # the file is tried before the row commits: a change the view could not
                # render (a full disk, a read-only folder) stores nothing (Z, H4)
                new = change(current)
                if new is not None and new != current:
                    files.probe_write(path, new, root=self.root)
                return new

            done = self.store.change_document(rel, written_first, now=now or _stamp(), by=self.by)
            if rel in held:  # a deletion of a file that was never a row: gone here too
                with contextlib.suppress(FileNotFoundError):
                    files.unlink(path, root=self.root)
            if not (later and bulk):
                # (later: the refresh that ends the bulk write renders it, as a row written
                # since the view last looked; a hand edit made meanwhile is kept there)
                self._render(state, rel, done.body, done.revision, done.updated_at)
            return done.body

    def conflicts(self) -> list[DocumentConflict]:
        return self.store.document_conflicts()

    def verify(self) -> list[str]:
        """The paths of the stored documents, each checked against its file here."""
        held = []
        for doc in self.store.documents_since(0):
            path = os.path.join(self.root, doc.path)
            if files.read_text(path, root=self.root) != doc.body:
                raise StorageError(
                    f"{doc.path} in the memory root differs from its stored row after the "
                    "copy: nothing else was changed; run memdir migrate again"
                )
            if doc.body is not None:
                held.append(doc.path)
        return held

    # -- the view --------------------------------------------------------------------------

    @contextlib.contextmanager
    def _view(self) -> Iterator[dict[str, object]]:
        """The view's state, under its lock, saved when it changed: also when the work
        inside raised (a change its rules refused), since what it rendered is on disk.
        Reentrant in a thread: a change's own rules may read the tiers (a procedure's
        duplicate guard reads the procedures it resembles), and a second flock of the lock
        file from the same process would wait for ever on the first. The lock is waited
        for at most memory.busy_timeout_ms, as the scope's lock is."""
        import json

        held = _views()
        if self.root in held:
            yield held[self.root]  # the outer one saves it
            return
        state_path = os.path.join(self.root, VIEW_STATE)
        wait = int(getattr(self.store, "busy_timeout_ms", 10_000))
        busy = (
            f"the view of {self.root} is locked by another memdir process (waited {wait} ms): "
            "nothing was changed; try again (or raise memory.busy_timeout_ms)"
        )
        with files.locked(os.path.join(self.root, ".locks"), "view", wait, busy):
            raw = files.read_text(state_path, root=self.root)
            try:
                state = json.loads(raw) if raw else {}
            except ValueError:
                state = {}  # unreadable: every file is looked at again, nothing is lost
            if not isinstance(state, dict) or not isinstance(state.get("files"), dict):
                state = {"seen": 0, "files": {}}
            before = json.dumps(state, sort_keys=True)

            def save() -> None:
                after = json.dumps(state, sort_keys=True)
                if after != before:
                    # a writer killed mid-save left its temp file: under the lock, no live
                    # writer owns one
                    files.sweep_temps(state_path, root=self.root)
                    files.atomic_write(state_path, after + "\n", root=self.root)

            held[self.root] = state
            try:
                yield state
            except BaseException:
                del held[self.root]
                with contextlib.suppress(OSError, StorageError):
                    save()  # the error that is on its way out is the one to report
                raise
            del held[self.root]
            save()

    def _local(self) -> set[str]:
        """The watched files of the view as they are on disk (relative paths)."""
        found = {rel for rel in WATCHED_FILES if os.path.lexists(os.path.join(self.root, rel))}
        for folder in WATCHED_DIRS:
            for name in files.listdir(os.path.join(self.root, folder), root=self.root):
                if name.endswith(".md") and not name.startswith(files.TEMP_PREFIX):
                    found.add(f"{folder}/{name}")
        return found

    def _refresh(self, state: dict[str, object], push: bool = True) -> set[str]:
        """Push the view's hand edits, render what was stored since; returns the files
        held back: not text (not UTF-8, or a NUL the database cannot store) or a symlink
        out of the memory root (X1), so neither read, pushed nor rendered over: left as
        they are, nothing lost, as SQLite leaves them. `push` False (inside a change's
        transaction): nothing is written to the store; the edits wait for the next
        refresh outside it."""
        held: set[str] = set()
        kept = state.get("conflicts")
        kept = dict(kept) if isinstance(kept, dict) else {}
        for conflict_id, name in sorted(kept.items()):
            if not push:
                break
            if files.read_text(os.path.join(self.root, str(name)), root=self.root) is None:
                self.store.settle_conflict(int(conflict_id))  # merged and deleted: settled
                del kept[conflict_id]
        state["conflicts"] = kept
        rendered = _files(state)
        edits: list[tuple[str, str | None, int]] = []
        unknown: dict[str, str] = {}
        for rel in sorted(self._local() | set(rendered)):
            path = os.path.join(self.root, rel)
            base = rendered.get(rel)
            if base is not None and _stat(path) == base[2:]:
                continue  # as rendered (mtime, size and ctime): not read again
            try:
                text = _text_of(path, self.root)
            except (StorageError, ValidationError):  # not text, or a link out (X1)
                held.add(rel)
                continue
            if base is None:
                if text is not None:
                    unknown[rel] = text  # never rendered here, or the state was lost
                continue
            if body_hash(text) == base[1]:
                self._record(state, rel, text, base[0])  # touched, not changed
                continue
            else:
                revision = base[0]
            edits.append((rel, text, revision))
        if unknown:
            edits += self._unknown(state, unknown, push)
        gone = [rel for rel, text, _ in edits if text is None]
        if len(gone) > 1 and len(gone) == len(rendered):
            # every rendered file missing at once: a view wiped or made again (`rm -rf` of
            # the root, a fresh checkout), not a person deleting memories. Deleting them
            # for the whole team would lose what nobody chose to lose: they are rendered
            # again from the rows instead (storage.md). Some files deleted: deletions.
            for rel in gone:
                rendered.pop(rel, None)
            state["files"] = {k: list(v) for k, v in rendered.items()}
            state["seen"] = 0  # every row is looked at again below: the gone ones render
            edits = [edit for edit in edits if edit[1] is not None]
        if push:
            for rel, text, revision in edits:
                self._push(state, rel, text, revision)
        else:
            held.update(rel for rel, _, _ in edits)  # not rendered over: pushed later
        try:
            seen = int(str(state.get("seen", 0)))
        except ValueError:
            seen = 0  # a state edited into another shape: every row is looked at again
        top = self.store.document_revision()
        if top != seen:
            for doc in self.store.documents_since(seen if top > seen else 0):
                if doc.path not in held:
                    self._render(state, doc.path, doc.body, doc.revision, doc.updated_at, push)
            state["seen"] = top
        return held

    def _unknown(
        self, state: dict[str, object], found: dict[str, str], push: bool
    ) -> list[tuple[str, str | None, int]]:
        """Files the view's state does not know (`found`: rel -> text): a file new here, a
        memory root from before team mode, or a view whose .view.json was lost. A file
        saying what its row says, or what the row said at one of its last PAST_KEPT
        revisions (a render from before the state was lost, since written over by the
        team), is no hand edit: the row is rendered. Any other text is a hand edit made on
        no revision known: stored if there is no row, else kept as a conflict (nothing of
        it lost). Returns those edits, to push."""
        known = self.store.documents_known(sorted(found))
        edits: list[tuple[str, str | None, int]] = []
        for rel, text in sorted(found.items()):
            doc = known.get(rel)
            digest = body_hash(text)
            if doc is None or (text != doc.body and digest not in doc.past):
                edits.append((rel, text, 0))
                continue
            if text != doc.body:
                self._record(state, rel, text, 0)  # a stale render: the row's goes over it
            self._render(state, rel, doc.body, doc.revision, doc.updated_at, push)
        return edits

    def _refresh_one(self, state: dict[str, object], rel: str) -> set[str]:
        """_refresh for the one file a change inside bulk() is about to make: its hand edit
        pushed first; returns {rel} when it is held back (not text, or a link out)."""
        path = os.path.join(self.root, rel)
        base = _file_of(state, rel)
        if base is not None and _stat(path) == base[2:]:
            return set()  # as rendered: not read again
        try:
            text = _text_of(path, self.root)
        except (StorageError, ValidationError):
            return {rel}
        if base is None:
            if text is not None:
                for edit in self._unknown(state, {rel: text}, True):
                    self._push(state, *edit)
        elif body_hash(text) == base[1]:
            self._record(state, rel, text, base[0])  # touched, not changed
        else:
            self._push(state, rel, text, base[0])
        return set()

    def _push(self, state: dict[str, object], rel: str, text: str | None, revision: int) -> None:
        """A hand edit of `rel` (None: deleted) made on the view rendered at `revision`:
        written back through the same change; when the row moved meanwhile it is kept (a
        conflict: in the database and beside the file) and the row's version rendered."""
        saved = _saved_at(os.path.join(self.root, rel)) if text is not None else None
        done = self.store.change_document(
            rel, _offer(text), now=_stamp(saved), by=self.by, expected=revision
        )
        if done.conflict and text is not None:
            name = conflict_file(rel, done.conflict)
            files.atomic_write(os.path.join(self.root, name), text, root=self.root)
            kept = state.get("conflicts")
            if not isinstance(kept, dict):
                kept = state["conflicts"] = {}
            kept[str(done.conflict)] = name
        self._render(state, rel, done.body, done.revision, done.updated_at, force=True)

    def _render(
        self,
        state: dict[str, object],
        rel: str,
        body: str | None,
        revision: int,
        updated_at: str,
        push: bool = True,
        force: bool = False,
    ) -> None:
        """Write the stored version of `rel` into the view (unless it is there already),
        its mtime the one every machine gives it (settle_mtime): the shared caches keyed
        by a file's (mtime, size) then agree across machines. A file changed since the
        view's check (a person saving it while a write waited for the scope's lock) is
        pushed as a hand edit first (`push` False: left as it is for the next refresh to
        push), never written over unseen; only what lands inside the final read and rename
        can still be lost."""
        known = _file_of(state, rel)
        if not force and known is not None and known[0] >= revision:
            return
        path = os.path.join(self.root, rel)
        if not force:
            edit = self._edited(path, known, body)
            if edit is not None:
                if push:
                    self._push(state, rel, edit[0], edit[1])
                return
        if files.read_text(path, root=self.root) != body:
            self._put(path, body)
            if rel.startswith(DERIVED):
                state["derive"] = os.urandom(8).hex()  # a token: see refresh()
        if body is not None:
            settle_mtime(path, updated_at, revision)
        self._record(state, rel, body, revision)

    def _edited(
        self, path: str, known: tuple[int, str, int, int, int] | None, body: str | None
    ) -> tuple[str, int] | None:
        """(the text, the revision it was made on) of a hand edit of `path` the view has not
        seen: a file that is there and says neither what was rendered nor `body` (what is
        about to be). Read whatever its stat says: an edit saved with the stat rendered
        (the same size within a coarse clock tick) would be written over unseen."""
        if not os.path.lexists(path):
            return None
        try:
            text = _text_of(path, self.root)
        except (StorageError, ValidationError):
            return None  # not text: left to the refresh, which holds it back
        if text is None or text == body or (known is not None and body_hash(text) == known[1]):
            return None
        return text, 0 if known is None else known[0]

    def _record(self, state: dict[str, object], rel: str, body: str | None, revision: int) -> None:
        """What the view holds of `rel` now: its revision, hash and (mtime, size, ctime)."""
        rendered = state.get("files")
        if not isinstance(rendered, dict):
            rendered = state["files"] = {}
        if body is None:
            rendered.pop(rel, None)
        else:
            stat = _stat(os.path.join(self.root, rel))
            rendered[rel] = [revision, body_hash(body), *stat]


def _writable(root: str) -> bool:
    """Whether the view can be rendered in the memory root `root` (one that is not there
    yet is made by the first render)."""
    return not os.path.isdir(root) or os.access(root, os.W_OK)


def _text_of(path: str, root: str) -> str | None:
    """A file of the view as text to store: StorageError when it is not (left alone)."""
    text = files.read_for_rewrite(path, root=root)
    if text is not None and "\0" in text:
        shown = os.path.relpath(path, root)
        raise StorageError(
            f"{shown} holds a NUL byte, which the team database cannot store: it was left as "
            "it is; remove the byte, then write again"
        )
    return text


def _stat(path: str) -> tuple[int, int, int]:
    """(mtime, size, ctime) in ns: what says a file of the view is as rendered. The mtime
    is the row's (settle_mtime), so the same on every machine; the ctime is this
    machine's, set by the render and by every change since, which no tool sets back (an
    editor or `cp -p` can restore an mtime)."""
    try:
        found = os.stat(path)
    except OSError:
        return (-1, -1, -1)
    return (found.st_mtime_ns, found.st_size, found.st_ctime_ns)


def settle_mtime(path: str, updated_at: str, revision: int) -> None:
    """Give a rendered file the mtime every machine gives that revision: the second its
    row was written (`updated_at`), plus the revision (mod 10^9) in nanoseconds, so two
    revisions written in one second differ. The entry cache, the procedure prints and
    the search index (shared rows) key a file by its (mtime, size): with the view's
    own mtimes, each machine's render would look changed to every other one. A stamp
    that is not a time (a row of another writer) leaves the file's mtime as it is."""
    from datetime import UTC, datetime

    try:
        when = datetime.fromisoformat(updated_at)
    except ValueError:
        return
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    import math

    ns = math.floor(when.timestamp()) * 1_000_000_000 + revision % 1_000_000_000
    with contextlib.suppress(OSError):  # gone or not ours: the next refresh looks again
        os.utime(path, ns=(ns, ns), follow_symlinks=False)


def conflict_file(rel: str, conflict_id: int) -> str:
    """Where a kept hand edit is written beside its file (relative to the memory root)."""
    return f"{rel}.conflict-{conflict_id}"


def _files(state: dict[str, object]) -> dict[str, tuple[int, str, int, int, int]]:
    """rel -> (revision, hash, mtime_ns, size, ctime_ns) of what was last rendered."""
    raw = state.get("files")
    out: dict[str, tuple[int, str, int, int, int]] = {}
    for rel in raw if isinstance(raw, dict) else ():
        found = _file_of(state, str(rel))
        if found is not None:
            out[str(rel)] = found
    return out


def _file_of(state: dict[str, object], rel: str) -> tuple[int, str, int, int, int] | None:
    """_files(state).get(rel), without reading every other file's record (a bulk write of
    hundreds of files looks up one at a time). A state written before the ctime was kept
    gives -2, so the file is read once and hashed."""
    raw = state.get("files")
    value = raw.get(rel) if isinstance(raw, dict) else None
    if isinstance(value, list) and len(value) in (4, 5):
        try:
            ctime = int(value[4]) if len(value) == 5 else -2
            return (int(value[0]), str(value[1]), int(value[2]), int(value[3]), ctime)
        except (TypeError, ValueError):
            pass  # edited into another shape: as if never rendered here
    return None


def _stamp(at: float | None = None) -> str:
    """An ISO time of `at` (default now): a row's updated_at."""
    from datetime import UTC, datetime

    when = datetime.now(UTC) if at is None else datetime.fromtimestamp(at, UTC)
    return when.isoformat(timespec="seconds")


def _saved_at(path: str) -> float | None:
    """When a hand edit was saved: its file's mtime (never later than now), which the row
    keeps and every view's render then gives back (settle_mtime), so what orders the
    files by time (distill's watermark, `since`) sees them as the person wrote them."""
    import time

    try:
        return min(os.stat(path).st_mtime, time.time())
    except OSError:
        return None  # deleted: the deletion is now


def _offer(text: str | None) -> Callable[[str | None], str | None]:
    """The change a hand edit makes: its text, whatever is stored."""
    return lambda _current: text


def open_documents(memory_dir: str, store: object) -> Documents:
    """Team documents when the store keeps them as rows, the files otherwise."""
    if keeps_documents(store):
        return TeamDocuments(memory_dir, store)
    return Documents(memory_dir)
