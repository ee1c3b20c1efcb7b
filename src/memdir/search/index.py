"""The search index follows the files (Q1, Q3, G4): before a search, every markdown file
of the memory root is compared with what the index holds — (mtime, size) first, then the
content hash — and only files that changed are chunked again; deleted files leave.

A file's chunks are replaced in one transaction, so a search never sees half a file.
"""

from __future__ import annotations

import os
import stat
import time

from ..clock import iso
from ..paths import STEM_CHECKS, Layout
from ..storage import files, watched
from ..storage.documents import keeps_documents
from ..storage.hashing import text_hash
from ..storage.rows import FileState

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from ..storage.base import Store
    from ..storage.rows_cold import FileChunks, NewChunk
    from . import chunks
else:
    from ..lazy import lazy

    chunks = lazy("memdir.search.chunks")  # only when a file changed

# kind of hit -> folder under the memory root
TIERS = (("procedure", "procedures"), ("global", "global"), ("task", "tasks"), ("daily", "daily"))
CHUNK_KINDS = tuple(kind for kind, _ in TIERS)
# Q3: a file up to this size is indexed, in bounded chunks (a 5 MB daily log is a
# legitimate log: ~0.5 s to chunk once); a bigger one is left out, and search and doctor
# name it. Reading and chunking grow linearly, so the bound keeps one sync under seconds.
MAX_INDEX_BYTES = 32 * 1024 * 1024


def sync(
    layout: Layout,
    store: Store,
    full: bool = False,
    progress: Callable[[int, int], None] | None = None,
    too_big: list[str] | None = None,
    kinds: tuple[str, ...] = CHUNK_KINDS,
) -> int:
    """Bring the index up to date with the files; returns how many files were (re)chunked.
    `full` re-reads every file, as `memdir reindex` does. `too_big` collects the files
    left out for their size (filled before anything is written). `kinds`: only the files
    of these tiers (a search of some kinds looks at no other folder). A process that lives
    on finds nothing to do without a look at any file while inotify says neither the
    memory root nor a tier's folder changed since its last sync (storage/watched.py); not
    in team mode, where other machines write the scope's index too."""
    if not set(kinds) & set(CHUNK_KINDS):
        return 0
    if full or progress is not None or keeps_documents(store):
        return _sync(layout, store, full, progress, too_big, kinds)
    changed = [0]

    def synced() -> tuple[tuple[str, ...], bool]:
        left_out: list[str] = []
        linked: list[str] = []  # their changes raise no event in these folders
        changed[0] = _sync(layout, store, False, None, left_out, kinds, linked)
        return tuple(left_out), not linked

    # the index is the files', so in step with them until one changes (for this store)
    folders = _folders(layout)
    if not folders:
        return _sync(layout, store, False, None, too_big, kinds)
    left_out = watched.kept(folders, _synced_key(layout, kinds, folders), synced)
    if too_big is not None and isinstance(left_out, tuple):
        too_big.extend(left_out)
    return changed[0]


def ready(layout: Layout, store: Store) -> None:
    """Keep sync's answer under the watch where the index is in step with the files
    already; where it is not, nothing is read and nothing written (the fork
    server readying the next call through a read-only look: the call syncs)."""
    if keeps_documents(store):
        return

    def in_step() -> tuple[tuple[str, ...] | None, bool]:
        left_out: list[str] = []
        linked: list[str] = []
        found = scan(layout, left_out, CHUNK_KINDS, linked)
        stale, gone = _behind(found, store.indexed_files(), False, CHUNK_KINDS)
        if stale or gone:
            return None, False
        return tuple(left_out), not linked

    folders = _folders(layout)
    if folders:
        watched.kept(folders, _synced_key(layout, CHUNK_KINDS, folders), in_step)


def _folders(layout: Layout) -> tuple[str, ...]:
    """The tiers' folders that exist, which hold the index's files. Not the memory root:
    memory.db may live there, and every connection to it would drop what is kept; a
    tier's folder made later is seen by the stat of each that was missing (_synced_key)."""
    tiers = (os.path.join(layout.memory_dir, f) for _, f in TIERS)
    return tuple(path for path in tiers if os.path.isdir(path))


def _synced_key(layout: Layout, kinds: tuple[str, ...], folders: tuple[str, ...]) -> str:
    """The kept sync of this store, for these tiers, with these of their folders there:
    a folder made since asks for another key, so the sync runs again."""
    there = ",".join(os.path.basename(path) for path in folders)
    return f"index.synced {layout.db} {','.join(kinds)} {there}"


def _behind(
    found: dict[str, tuple[str, str, int, int]],
    indexed: dict[str, FileState],
    full: bool,
    kinds: tuple[str, ...],
) -> tuple[list[tuple[str, str, str, int, int]], list[str]]:
    """(the files to chunk again: new, changed, or all when `full`; the indexed files
    gone from disk)."""
    stale = [
        (rel, kind, path, mtime, size)
        for rel, (kind, path, mtime, size) in found.items()
        if full or indexed.get(rel, ("", -1, -1, ""))[1:3] != (mtime, size)
    ]
    gone = [rel for rel, row in indexed.items() if row[0] in kinds and rel not in found]
    return stale, gone


def _sync(
    layout: Layout,
    store: Store,
    full: bool,
    progress: Callable[[int, int], None] | None,
    too_big: list[str] | None,
    kinds: tuple[str, ...],
    linked: list[str] | None = None,
) -> int:
    found = scan(layout, too_big, kinds, linked)
    stale, gone = _behind(found, store.indexed_files(), full, kinds)
    changes: list[FileChunks] = []
    if progress is not None and stale:
        progress(0, len(stale))  # a bar from the first file on, not after it
    for done, (rel, kind, path, mtime, size) in enumerate(stale, 1):
        from ..storage.rows_cold import FileChunks  # only when a file changed

        text = _read_inside(layout, path)
        if text is None:
            continue
        state = FileState(kind, mtime, size, text_hash(text))
        # a touch re-chunks too: chunks are dated by the file's mtime (`since`), and
        # replace_chunks gives a chunk whose text did not change its vector back
        changes.append(FileChunks(rel, state, _chunks(kind, rel, text, mtime)))
        if progress is not None:
            progress(done, len(stale))
    if changes or gone:
        store.replace_chunks(changes, gone)
    return len(changes)


def scan(
    layout: Layout,
    too_big: list[str] | None = None,
    kinds: tuple[str, ...] = CHUNK_KINDS,
    linked: list[str] | None = None,
) -> dict[str, tuple[str, str, int, int]]:
    """rel path -> (kind, path, mtime_ns, size) of every markdown file the index covers
    (of the tiers `kinds`); `too_big` collects those left out for their size, `linked`
    those that are symlinks or have other hard links. A folder named x.md is no file."""
    found = {}
    for kind, folder in TIERS:
        if kind not in kinds:
            continue
        valid = STEM_CHECKS[folder]
        listing = files.scandir(os.path.join(layout.memory_dir, folder), root=layout.memory_dir)
        for item in listing:
            if not item.name.endswith(".md") or not valid(item.name[:-3]):
                continue  # not a memory file's name (X1): doctor reports it
            try:
                info = item.stat()
            except OSError:
                continue
            if not stat.S_ISREG(info.st_mode):
                continue  # a folder named x.md: doctor reports it (layout.stray)
            if linked is not None and (info.st_nlink != 1 or item.is_symlink()):
                linked.append(f"{folder}/{item.name}")
            if info.st_size > MAX_INDEX_BYTES:
                if too_big is not None:
                    too_big.append(f"{folder}/{item.name}")
                continue
            path = os.path.join(layout.memory_dir, folder, item.name)
            found[f"{folder}/{item.name}"] = (kind, path, info.st_mtime_ns, info.st_size)
    return found


def _read_inside(layout: Layout, path: str) -> str | None:
    """The file's text; None for a symlink that leads out of the memory root (X1)."""
    try:
        text = files.read_text(path, root=layout.memory_dir)
    except Exception:  # unreadable now: try again at the next search
        return None
    return None if text is None or "\0" in text else text


def _chunks(kind: str, rel: str, text: str, mtime_ns: int) -> list[NewChunk]:
    from ..storage.rows_cold import NewChunk

    modified = iso(mtime_ns / 1e9)
    day = os.path.basename(rel)[:-3] if kind == "daily" else None
    date = modified
    if day is not None:
        try:
            date = iso(time.mktime(time.strptime(day, "%Y-%m-%d")))
        except ValueError:
            pass
    return [
        NewChunk(c.start, c.end, c.date or date, c.content, c.hash)
        for c in chunks.chunk(kind, text, date, day)
    ]
