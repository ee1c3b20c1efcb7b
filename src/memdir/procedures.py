"""Procedures (P1-P3): reusable workflows, one markdown file each, found by plain substring
match on name, frontmatter and body, so simple keywords always work."""

from __future__ import annotations

import os
import stat
import time

from . import advice, query, revisions
from .errors import MemdirError, NotFoundError, ValidationError
from .models import Procedure, Similar
from .names import is_name
from .paths import PROCEDURES_LOCK, Layout
from .storage import files, frontmatter, watched
from .storage.documents import Documents

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from .storage.base import Store

SNIPPET_LINES = 3
LOCK = PROCEDURES_LOCK


def write(
    layout: Layout,
    name: str,
    content: str,
    twins: Callable[[], tuple[Similar, ...]] | None = None,
    expected: str | None = None,
    docs: Documents | None = None,
) -> Procedure:
    """Create or overwrite (P1). Frontmatter, if any, must parse: a broken one is refused.
    The name is the identity (X5): writing exactly the text the file holds rewrites
    nothing and comes back `duplicate`. `twins` (the duplicate guard) names the other
    procedures this one resembles, under the lock every procedure write takes.
    `expected`: the revision of the file the change was made from (V4). In team mode the
    check and the write are on the stored row (W1)."""
    path = layout.procedure(name)
    text = content if content.endswith("\n") else content + "\n"
    frontmatter.parse(text, os.path.relpath(path, layout.memory_dir))
    found: list[tuple[Similar, ...]] = []

    def change(held: str | None) -> str | None:
        revisions.check(expected, held, f"procedure {name}")
        if held == text:
            return held
        found.append(twins() if twins is not None else ())
        return text

    if docs is None or not docs.shared:
        docs = _Local(layout)
    docs.change(path, LOCK, change)
    if not found:
        return read(layout, name)._replace(duplicate=True)
    return _load(layout, name, path, text)._replace(similar=found[0])


def _held(layout: Layout, name: str) -> str | None:
    """What the procedure's file holds now; None when there is none, or it is a symlink
    out of the memory root (never read, X1: the write that follows refuses it)."""
    try:
        return files.read_inside(layout.memory_dir, layout.procedure(name), name)
    except ValidationError:
        return None


def read(layout: Layout, name: str) -> Procedure:
    path = layout.procedure(name)
    text = files.read_inside(layout.memory_dir, path, f"procedures/{name}.md")
    if text is None:
        raise NotFoundError(
            f"no procedure named {name!r}: find the procedures with {advice.procedure_list()}",
            kind="procedure",
            key=name,
        )
    return _load(layout, name, path, text)


def list_all(layout: Layout) -> list[Procedure]:
    """Every procedure, by name; a process that lives on keeps them while inotify says
    procedures/ is unchanged (storage/watched.py), unless a file is a link."""
    return [proc for proc, _ in _haystacks(layout)]


def _list_all(layout: Layout) -> tuple[tuple[Procedure, ...], bool]:
    procedures = []
    plain = True  # no file is a link: a change made through one raises no event here
    for name in _names(layout):
        path = layout.procedure(name)
        try:
            info = os.lstat(path)
            plain = plain and stat.S_ISREG(info.st_mode) and info.st_nlink == 1
        except OSError:
            plain = False
        try:
            text = files.read_inside(layout.memory_dir, path, f"procedures/{name}.md")
        except MemdirError as exc:  # a link out, a folder, unreadable: listed with its error
            procedures.append(_load(layout, name, path, "")._replace(error=str(exc)))
            continue
        if text is not None:
            procedures.append(_load(layout, name, path, text))
    return tuple(procedures), plain


def fingerprints(layout: Layout, store: Store) -> dict[str, tuple[int | None, set[int]]]:
    """name -> (the key of its normalised body, its LSH band keys) of every readable
    procedure, cached in memory.db by each file's (mtime, size): what the duplicate guard
    compares a new body with before reading any file. Hand edits show at once."""
    from . import similarity
    from .errors import MemdirError
    from .storage.rows_cold import ProcedurePrint

    try:
        cache = store.procedure_prints()
    except MemdirError:
        cache = {}  # a broken or locked memory.db: the files are read instead
    current: dict[str, ProcedurePrint] = {}
    bodies: dict[str, tuple[int, int, str]] = {}
    for name in _names(layout):
        path = layout.procedure(name)
        try:
            info = os.stat(path)
        except OSError:
            continue
        cached = cache.get(name)
        if cached is not None and cached[:2] == (info.st_mtime_ns, info.st_size):
            current[name] = cached
            continue
        try:
            text = files.read_inside(layout.memory_dir, path, f"procedures/{name}.md")
            _meta, body = frontmatter.split(text or "")
        except MemdirError:
            continue  # unreadable or broken: nothing to compare with
        bodies[name] = (info.st_mtime_ns, info.st_size, body)
    if bodies:
        names = list(bodies)
        prints = similarity.fingerprints([bodies[n][2] for n in names])
        changed = {
            name: ProcedurePrint(*bodies[name][:2], *fingerprint)
            for name, fingerprint in zip(names, prints, strict=True)
        }
        current.update(changed)
        gone = [name for name in cache if name not in current]
        try:
            store.update_procedure_prints(changed, gone)
        except MemdirError:
            pass  # only a cache
    return {name: (row[2], similarity.bands_of(row[3])) for name, row in current.items()}


def search(
    layout: Layout, node: query.Node, since: str | None, limit: int
) -> list[tuple[Procedure, float, tuple[int, int], str]]:
    """(procedure, score, line range, snippet) of each match, best first. Score: how often
    the query's words occur, so a procedure about the thing outranks one that mentions it."""
    words = query.positive_words(node)
    found = []
    for proc, haystack in _haystacks(layout):
        if not query.matches(node, haystack):
            continue
        if since is not None and proc.updated < since:
            continue
        score = float(sum(haystack.count(w) for w in words))
        lines, snippet = _snippet(proc.content, words)
        found.append((proc, score, lines, snippet))
    found.sort(key=lambda item: (-item[1], item[0].name))
    return found[:limit]


def _haystacks(layout: Layout) -> tuple[tuple[Procedure, str], ...]:
    """(procedure, its name and text lowercased: what search looks in) of each, kept as
    one value, so a change reads the files once for the listing and the search alike."""

    def make() -> tuple[tuple[tuple[Procedure, str], ...], bool]:
        procedures, plain = _list_all(layout)
        return tuple((p, f"{p.name}\n{p.content}".lower()) for p in procedures), plain

    found = watched.kept(layout.procedures_dir, "procedures.haystacks", make)
    return found if isinstance(found, tuple) else ()


def _names(layout: Layout) -> list[str]:
    entries = files.listdir(layout.procedures_dir, root=layout.memory_dir)  # X1
    names = []
    for entry in sorted(entries):
        stem = entry[:-3]
        if entry.endswith(".md") and is_name(stem):
            names.append(stem)
    return names


def _load(layout: Layout, name: str, path: str, text: str) -> Procedure:
    error = None
    try:
        meta, body = frontmatter.parse(text, os.path.relpath(path, layout.memory_dir))
    except ValidationError as exc:
        meta, body, error = {}, text, str(exc)
    description = meta.get("description")
    return Procedure(
        name=name,
        path=os.path.relpath(path, layout.memory_dir),
        content=text,
        description=str(description) if description is not None else _first_line(body),
        updated=str(meta.get("updated") or _mtime(path)),
        error=error,
    )


def _first_line(body: str) -> str | None:
    for line in body.split("\n"):
        text = line.strip().lstrip("#").strip()
        if text:
            return text[:120]
    return None


def _mtime(path: str) -> str:
    try:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(os.path.getmtime(path)))
    except OSError:
        return ""


def _snippet(content: str, words: list[str]) -> tuple[tuple[int, int], str]:
    """The first line holding a query word, with the lines around it (1-based range)."""
    lines = content.split("\n")
    hit = next((i for i, line in enumerate(lines) if any(w in line.lower() for w in words)), 0)
    start = max(0, hit - 1)
    end = min(len(lines), start + SNIPPET_LINES)
    return (start + 1, end), "\n".join(lines[start:end]).strip()


class _Local(Documents):
    """The files, with what a procedure's file holds read as _held reads it (a symlink out
    of the memory root reads as none; the write that follows refuses it, X1)."""

    def __init__(self, layout: Layout) -> None:
        super().__init__(layout.memory_dir)
        self.layout = layout

    def change(
        self,
        path: str,
        lock: str | None,
        change: Callable[[str | None], str | None],
        now: str = "",
    ) -> str | None:
        with self._locked(lock):
            try:
                current = files.read_inside(self.root, path)
            except ValidationError:
                current = None
            new = change(current)
            if new != current:
                self._put(path, new)
            return new
