"""Doctor's checks of the disk: memory.db (read through a store that cannot write),
the layout of the memory root (L2), files that are not text, and temp files of killed
writes, the one thing here that --fix removes."""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable

from ... import advice
from ...errors import MemdirError, NotFoundError, StorageError, ValidationError
from ...paths import HOT_OVERFLOW, STEM_CHECKS, Layout, is_inside, lock_of, shown_path
from ...records import Record
from ...storage import files
from ...storage.documents import CONFLICT_RE, VIEW_STATE
from .report import Finding, few, size_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ...storage.base import Store

TEMP_MIN_AGE = 60.0  # seconds: an atomic write lasts milliseconds; an older temp was left
FREE_RATIO = 0.25  # free pages past this share of memory.db: suggest VACUUM
FREE_MIN_BYTES = 1 << 20
WAL_MAX_BYTES = 64 << 20

ROOT_FILES = {
    "HOT.md",
    "HOT.md.bak",
    HOT_OVERFLOW,
    "MEMORY.md",
    "heartbeat-state.json",
    "memory.db",
    "memory.db-wal",
    "memory.db-shm",
    "memory.db-journal",
    "memory.db-hits",  # the hits searches left for a writer to record
    VIEW_STATE,  # team mode: what the view last rendered
}
# folder -> whether a file name's stem is one memdir reads there (L2)
TIERS: dict[str, Callable[[object], bool]] = STEM_CHECKS
NOISE = {".DS_Store", "Thumbs.db", "desktop.ini", ".gitignore", ".gitattributes", ".gitkeep"}
TEMP_RE = re.compile(rf"{re.escape(files.TEMP_PREFIX)}(.+)\.[0-9]+\.[0-9a-f]{{12}}")


# -- memory.db ---------------------------------------------------------------------------


def check_team_database(url: str, scope: str, store: Store, found: list[Finding]) -> dict[str, Any]:
    """W1: the PostgreSQL store: the server reached, the scope's schema version, and its
    lexical index checked against its rows (PostgresStore.inspect), how semantic search
    ranks there (`vector_ranking`: pgvector, or Python and why), and whether row-level
    security holds the scope's tables (`row_security`: on, or off and why, L4). The URL is
    shown with its password replaced by ***."""
    from ...storage.postgres.url import redact

    where = f"{redact(url)} (scope {scope})"
    info: dict[str, Any] = {"path": where, "backend": "postgres", "scope": scope}
    try:
        health = store.inspect()
    except NotFoundError:
        info.update(exists=False, usable=False)
        found.append(
            Finding(
                "db.missing",
                "info",
                [where],
                f"scope {scope} does not exist yet in the database: the first fact, task, "
                "entry or search makes it",
                "nothing to do",
            )
        )
        return info
    except MemdirError as exc:
        info.update(exists=False, usable=False)
        found.append(
            Finding(
                "db.connect",
                "error",
                [where],
                str(exc),
                "check that the server is up and reachable, and the URL, role and password "
                "(PGPASSWORD, ~/.pgpass) right; the files keep working meanwhile",
            )
        )
        return info
    problems, schema, latest, size, _ = health
    info.update(exists=True, bytes=size, schema=schema)
    info["usable"] = problems == ["ok"] and schema == latest
    if problems != ["ok"]:
        found.append(
            Finding(
                "db.integrity",
                "error",
                [where],
                "the store is out of step: " + "; ".join(problems[:3]),
                "export it (memdir export) and import it into a new scope",
            )
        )
    elif schema != latest:
        newer = schema > latest
        found.append(
            Finding(
                "db.schema",
                "error" if newer else "info",
                [where],
                f"scope {scope} has schema version {schema}; this memdir's is {latest}"
                + (": a newer memdir wrote it" if newer else ""),
                "upgrade memdir (pip install -U memdir)"
                if newer
                else "any memdir write upgrades it",
                fixable=not newer,
            )
        )
    else:
        info["facts"] = store.count_facts()
        check_conflicts(store, found)
    ranking = getattr(store, "vector_ranking", None)  # PostgresStore's: how it ranks (Q2)
    if isinstance(ranking, str):
        info["vector_ranking"] = ranking
    row_security = getattr(store, "row_security", None)  # PostgresStore's (L4)
    if callable(row_security):
        try:
            info["row_security"] = str(row_security())
        except MemdirError as exc:
            info["row_security"] = f"unknown: {exc}"
    return info


def check_conflicts(store: Store, found: list[Finding]) -> None:
    """W1: hand edits of a rendered file made against a row that moved meanwhile: both
    versions are kept (the row's is in the file, the hand edit beside it), to be settled."""
    from ...storage.documents import conflict_file, keeps_documents

    if not keeps_documents(store):
        return
    for kept in store.document_conflicts():
        beside = conflict_file(kept.path, kept.id)
        found.append(
            Finding(
                "docs.conflict",
                "warning",
                [kept.path],
                f"{kept.path} was edited by hand on {kept.made_by} (at {kept.made_at}) from "
                f"revision {kept.base} while another write made it revision {kept.stored}: "
                f"the stored version is in {kept.path}, the hand edit is kept in {beside} "
                "on that machine",
                f"there, merge what you want of {beside} into {kept.path} (the edit goes back "
                f"as usual), then delete {beside}: the conflict is dropped",
            )
        )


def check_database(layout: Layout, store: Store, found: list[Finding]) -> dict[str, Any]:
    info: dict[str, Any] = {"path": os.path.relpath(layout.db, layout.memory_dir)}
    rel = info["path"]
    if not os.path.exists(layout.db):
        info.update(exists=False, usable=False)
        if _has_files(layout.global_dir) or _has_files(layout.tasks_dir):
            # writing an entry or a task's notes makes memory.db: it was there, and is gone
            finding = Finding(
                "db.missing",
                "error",
                [rel],
                "memory.db does not exist although global entries or task notes do: it was "
                "deleted or moved, and with it the facts, the task registry and the index",
                "put it back from a backup if it was moved; otherwise nothing to do: the next "
                "memdir command that needs it starts an empty one",
            )
        else:  # hot memory and daily logs alone never need it
            finding = Finding(
                "db.missing",
                "info",
                [rel],
                "memory.db does not exist yet: the first fact, task, entry or search makes it",
                "nothing to do",
            )
        found.append(finding)
        return info
    info["exists"] = True
    try:
        health = store.inspect()
    except MemdirError as exc:
        info["usable"] = False
        found.append(
            Finding(
                "db.integrity",
                "error",
                [rel],
                f"memory.db cannot be read: {exc.__cause__ or exc}",
                "move it aside (the files keep working without it), then recover what it "
                f"holds: `sqlite3 {layout.db} .recover | sqlite3 recovered.db`, and move "
                "recovered.db into its place",
            )
        )
        return info
    wal = _size(layout.db + "-wal")
    problems, schema, latest, size, free = health
    info.update(bytes=size, free_bytes=free, wal_bytes=wal, schema=schema)
    info["usable"] = problems == ["ok"] and schema == latest
    if problems != ["ok"]:
        shown = "; ".join(problems[:3]) + (f" (+{len(problems) - 3} more)" if problems[3:] else "")
        found.append(
            Finding(
                "db.integrity",
                "error",
                [rel],
                f"memory.db is damaged: {shown}",
                "stop every memdir process, copy memory.db aside, and recover it: "
                f"`sqlite3 {layout.db} .recover | sqlite3 recovered.db`, then move "
                "recovered.db into its place",
            )
        )
    elif schema > latest:
        found.append(
            Finding(
                "db.schema",
                "error",
                [rel],
                f"memory.db has schema version {schema}, newer than this memdir knows "
                f"({latest}): a newer memdir wrote it",
                "upgrade memdir (pip install -U memdir)",
            )
        )
    elif schema < latest:
        found.append(
            Finding(
                "db.schema",
                "info",
                [rel],
                f"memory.db has schema version {schema}; this memdir's is {latest} (the checks "
                "that read the database were skipped)",
                f"any memdir write upgrades it; {advice.doctor(fix=True)} does it now",
                fixable=True,
            )
        )
    else:
        info["facts"] = store.count_facts()
    if problems == ["ok"] and free >= FREE_MIN_BYTES and free >= FREE_RATIO * size:
        # Not fixable: VACUUM rewrites the whole file under the write lock (every other
        # process's writes wait for it, seconds on a big store) and needs as much free
        # disk again; the free pages are reused by new facts anyway.
        found.append(
            Finding(
                "db.size",
                "info",
                [rel],
                f"{size_text(free)} of memory.db's {size_text(size)} are "
                f"free pages ({100 * free // size}%) left by deleted rows",
                f"reclaim them while no other memdir process runs: `sqlite3 {layout.db} VACUUM`",
            )
        )
    if wal > max(WAL_MAX_BYTES, size):
        found.append(
            Finding(
                "db.size",
                "info",
                [rel + "-wal"],
                f"memory.db-wal is {size_text(wal)}, larger than the database: a process that "
                "stays open keeps SQLite from resetting it",
                "restart long-running memdir processes (the MCP server); the log shrinks when "
                "the last one closes",
            )
        )
    return info


# -- the memory root -----------------------------------------------------------------------


class Scan(Record):
    """The memory root, listed once: memory files by folder, and what does not belong."""

    memory: dict[str, list[tuple[str, str, float]]]  # folder -> (rel, path, mtime) of files
    temps: list[tuple[str, float]]  # (rel, mtime) of temp files of atomic writes
    strays: list[str]  # rel paths memdir never reads
    outside: list[str]  # symlinks leading out of the memory root (X1)


def scan_root(layout: Layout) -> Scan:
    root = layout.memory_dir
    scan = Scan({folder: [] for folder in TIERS}, [], [], [])
    at_state_dir = os.path.realpath(root) == os.path.realpath(layout.state_dir)
    for item in _listing(root):
        name = item.name
        if TEMP_RE.fullmatch(name):
            scan.temps.append((name, _mtime(item)))
        elif name in TIERS and item.is_dir():
            if item.is_symlink() and not is_inside(root, item.path):
                scan.outside.append(name + "/")  # memdir refuses every file in it (X1)
            else:
                _scan_tier(layout, name, scan)
        elif (name == ".locks" or name in ROOT_FILES) and item.is_symlink():
            if not is_inside(root, item.path):
                scan.outside.append(name + ("/" if name == ".locks" else ""))
        elif name == ".locks" or name in NOISE or name in ROOT_FILES:
            continue
        elif CONFLICT_RE.search(name) and item.is_file():
            continue  # team mode: a kept hand edit, reported by docs.conflict
        elif name.startswith("memory.db-hits.") and name[15:].replace(".", "").isdigit():
            continue  # the hits journal while a writer records it (pid.count[.n])
        elif at_state_dir and (name == "config.toml" or name.endswith(".md")):
            continue  # memory.path = the state dir: config.toml and identity files live here
        else:
            scan.strays.append(name + ("/" if item.is_dir() else ""))
    return scan


def _scan_tier(layout: Layout, folder: str, scan: Scan) -> None:
    valid = TIERS[folder]
    for item in _listing(os.path.join(layout.memory_dir, folder)):
        rel = f"{folder}/{item.name}"
        if TEMP_RE.fullmatch(item.name):
            scan.temps.append((rel, _mtime(item)))
        elif item.name.endswith(".md") and valid(item.name[:-3]) and item.is_file():
            if item.is_symlink() and not is_inside(layout.memory_dir, item.path):
                scan.outside.append(rel)
            else:
                scan.memory[folder].append((rel, item.path, _mtime(item)))
        elif CONFLICT_RE.search(item.name) and item.is_file():
            continue  # team mode: a kept hand edit, reported by docs.conflict
        elif item.name not in NOISE:
            scan.strays.append(rel + ("/" if item.is_dir() else ""))


def check_layout(layout: Layout, scan: Scan, found: list[Finding]) -> None:
    for rel in sorted(scan.strays):
        rel = shown_path(rel)
        found.append(
            Finding(
                "layout.stray",
                "warning",
                [rel],
                f"{rel} is not part of memdir's layout; memdir never reads it",
                "move it out of the memory root, or rename it to what it should be "
                "(e.g. global/<kebab-name>.md); doctor leaves it alone: it may be yours",
            )
        )
    for rel in sorted(scan.outside):
        rel = shown_path(rel)
        found.append(
            Finding(
                "layout.symlink",
                "warning",
                [rel],
                f"{rel} is a symlink out of the memory root; memdir does not read it (X1)",
                "replace the link with the file itself",
            )
        )
    now = time.time()
    left = sorted(rel for rel, mtime in scan.temps if now - mtime >= TEMP_MIN_AGE)
    if left:
        found.append(
            Finding(
                "layout.temp",
                "warning",
                list(left),
                f"{len(left)} temp file(s) left by a write that was killed: {few(left)}",
                f"{advice.doctor(fix=True)} removes them",
                fixable=True,
            )
        )


def check_text(layout: Layout, scan: Scan, found: list[Finding]) -> set[str]:
    """Memory files that are not UTF-8 text: memdir refuses to rewrite them (Z)."""
    bad = set()
    candidates = [("HOT.md", layout.hot)] + [
        (rel, path) for folder in TIERS for rel, path, _ in scan.memory[folder]
    ]
    for rel, path in candidates:
        try:
            real = files.confined(layout.memory_dir, path)
            # O_NOFOLLOW: a link out is reported by the layout check, never read (X1)
            with os.fdopen(
                os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "rb"
            ) as handle:
                data = handle.read()
        except (FileNotFoundError, ValidationError):
            continue
        except OSError as exc:
            problem: str | None = f"cannot be read: {exc.strerror}"
        else:
            problem = _not_text(data)
        if problem is None:
            continue
        bad.add(rel)
        found.append(
            Finding(
                "files.encoding",
                "error",
                [rel],
                f"{rel} {problem}; memdir reads it with replacement characters and refuses "
                "to rewrite it",
                f"convert it to UTF-8 (e.g. `iconv -f latin1 -t utf-8`) or move it out of the "
                f"memory root: {os.path.join(layout.memory_dir, rel)}",
            )
        )
    return bad


def _not_text(data: bytes) -> str | None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"is not UTF-8 text (byte {exc.start})"
    return "holds NUL bytes: it is not text" if "\0" in text else None


def remove_temps(layout: Layout, rels: list[str]) -> list[str]:
    """Remove each temp file under the lock its writers take (storage.files.sweep_temps'
    rule: then no live writer can own it), if it is still old enough."""
    done = []
    for rel in rels:
        path = os.path.join(layout.memory_dir, rel)
        folder, name = os.path.split(rel)
        match = TEMP_RE.fullmatch(name)
        if match is None:
            continue
        lock = lock_of(f"{folder}/{match.group(1)}" if folder else match.group(1))
        with files.locked(layout.locks_dir, lock) if lock else contextlib.nullcontext():
            try:
                if time.time() - os.path.getmtime(path) < TEMP_MIN_AGE:
                    continue
                os.unlink(path)
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise StorageError(f"cannot remove {path}: {exc.strerror}") from exc
        done.append(f"removed {rel}: a temp file a killed write left behind")
    return done


def _listing(folder: str) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as items:
            return sorted(items, key=lambda item: item.name)
    except (FileNotFoundError, NotADirectoryError):
        return []


def _has_files(folder: str) -> bool:
    return any(item.name.endswith(".md") for item in _listing(folder))


def _mtime(item: os.DirEntry[str]) -> float:
    try:
        return item.stat(follow_symlinks=False).st_mtime
    except OSError:
        return 0.0


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
