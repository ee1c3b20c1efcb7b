"""A whole store in one portable file, and back (N3): `memdir export`, `memdir import`.

The archive is JSON Lines, UTF-8. Line 1 is the header:

    {"memdir_export": 1, "created": "2026-06-10T14:02:11Z", "schema": 6, "memdir": "0.1.0",
     "counts": {"file": 9, "fact": 120, ...}, "left_out": [...], "note": "..."}

then one record a line, each with its `kind`:

    fact           every column of the facts table (storage.sqlite.FACT_FIELDS), by id
    fact_usage     fact_id, hits, last_hit
    task           id, parent_id, state, started, ended
    session        id, surface, parent_id, started, ended
    session_write  session_id, what, n (what a session wrote, counted)
    kv             key, value (the distillation watermark...)
    file           root ("memory" or "state"), path (relative, "/"-separated), mtime_ns,
                   and `text`, or `base64` for bytes that are not UTF-8

Files: every regular file under the memory root (HOT.md and its .bak, global/, procedures/,
tasks/, daily/, heartbeat-state.json, and anything else put there) but the database,
MEMORY.md (derived), hidden folders such as .locks/, writers' temp files and the team
view's .view.json; and the markdown files of the state dir (the identity files).
config.toml stays behind: it is this machine's settings. The search index is derived, so
it is rebuilt, not carried.

An import checks the whole archive before it writes anything (archive_check.py: paths
stay inside their root, X1; no secrets, X2; facts F2/X3; the header's counts, so a
truncated archive is refused). Into an empty store it restores everything, facts with
their own ids. A store that holds memory is refused unless forced, and then merged into:
facts get new ids (their links follow), files are overwritten, and what the store holds
already is skipped — tasks, sessions and values with the same id or key (the store's are
kept), files with the same bytes, facts with the same category, text and creation time
(imported before). So importing an archive twice doubles nothing, and an import cut off
by a full disk is finished by running it again with --force.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys

from ..clock import iso
from ..errors import ConflictError, StorageError, ValidationError
from ..models import ImportItem, ImportReport
from ..paths import HOT_OVERFLOW, Layout, lock_of, safe_path
from ..records import Record
from ..storage import files
from ..storage.documents import is_document
from ..storage.rows_cold import FactIdentity
from .archive_format import DB_FILES, DERIVED, FORMAT, ROW_KINDS, latest_schema, root_dir

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import IO, Any

    from ..memory import Memory
    from .archive_check import CheckedArchive

    Row = dict[str, Any]

NOTE = (
    "config.toml (this machine's settings) is left out; MEMORY.md and the search index "
    "are derived and rebuilt on import"
)


class Exported(Record):
    """What an export wrote: records of each kind, and the files it left out and why."""

    path: str | None  # None: the archive went to a stream (stdout)
    counts: dict[str, int]
    left_out: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "counts": self.counts, "left_out": self.left_out}


class StoredFile(Record):
    root: str  # memory | state
    rel: str  # relative to the root, "/"-separated
    path: str


# -- export --------------------------------------------------------------------------------


def export(memory: Memory, out: IO[bytes]) -> Exported:
    """Write the whole store to `out` as an archive, streamed: rows come straight from the
    database cursor (one read transaction, so they are consistent) and files one by one."""
    import json

    from .. import __version__

    def emit(record: dict[str, Any]) -> None:
        out.write(json.dumps(record, ensure_ascii=False).encode("utf-8") + b"\n")

    layout, store = memory.layout, memory.store
    has_db = store.exists()  # else there are no rows, and nothing is created
    if has_db:
        memory.flush_hits()  # the hits searches left in the journal: the archive has them
    found, left_out = listing(layout)
    with store.snapshot() if has_db else contextlib.nullcontext():
        counts = store.archive_counts() if has_db else dict.fromkeys(ROW_KINDS, 0)
        counts = {"file": len(found), **counts}
        emit(
            {
                "memdir_export": FORMAT,
                "created": iso(memory.clock()),
                "schema": store.schema_version() if has_db else latest_schema(),
                "memdir": __version__,
                "counts": counts,
                "left_out": left_out,
                "note": NOTE,
            }
        )
        if has_db:
            for kind in ROW_KINDS:
                for row in store.archive_rows(kind):
                    emit({"kind": kind, **row})
    for item in found:
        emit(_file_record(item))
    return Exported(None, counts, left_out)


def export_to(memory: Memory, path: str) -> Exported:
    """export() into the file `path`, atomically: a failed export leaves no half archive."""
    with files.atomic_output(path, root=os.path.dirname(os.path.abspath(path))) as out:
        done = export(memory, out)
    return done._replace(path=path)


def listing(layout: Layout) -> tuple[list[StoredFile], list[str]]:
    """The files an archive carries, and those it leaves out with why ("x (a symlink)")."""
    memory_root, state_root = os.path.realpath(layout.memory_dir), layout.state_dir
    same_root = memory_root == os.path.realpath(state_root)
    found, left_out = [], []
    for folder, dirs, names in os.walk(layout.memory_dir):
        here = os.path.relpath(folder, layout.memory_dir)
        prefix = "" if here == "." else here.replace(os.sep, "/") + "/"
        for name in sorted(dirs):
            link = os.path.islink(os.path.join(folder, name))
            if name.startswith(".") or link:
                dirs.remove(name)
                if name != ".locks":
                    left_out.append(f"{prefix}{name}/ ({'a symlink' if link else 'hidden'})")
        dirs.sort()
        for name in sorted(names):
            if name.startswith(files.TEMP_PREFIX):
                continue  # a killed writer's temp file
            if not prefix and (name in DB_FILES or name == DERIVED):
                continue
            if not prefix and name.startswith("memory.db-hits."):
                continue  # the hits journal while a writer records it
            if same_root and not prefix and name == "config.toml":
                continue
            kind = _file_type(os.path.join(folder, name))
            if kind is None:
                found.append(StoredFile("memory", prefix + name, os.path.join(folder, name)))
            else:
                left_out.append(f"{prefix}{name} ({kind})")
    if not same_root:
        for rel, path in _state_files(state_root):
            kind = _file_type(path)
            if kind is None:
                found.append(StoredFile("state", rel, path))
            else:
                left_out.append(f"{rel} in the state dir ({kind})")
    return found, left_out


def _state_files(state_root: str) -> list[tuple[str, str]]:
    try:
        names = sorted(os.listdir(state_root))
    except OSError:
        return []
    return [(n, os.path.join(state_root, n)) for n in names if n.endswith(".md")]


def _file_type(path: str) -> str | None:
    """None for a regular file, else what it is instead (it is left out)."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return "unreadable"
    if stat.S_ISLNK(mode):
        return "a symlink"
    return None if stat.S_ISREG(mode) else "not a regular file"


def _file_record(item: StoredFile) -> dict[str, Any]:
    import base64

    try:
        # O_NOFOLLOW: a link swapped in since the listing is refused, never followed (X1)
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
        with os.fdopen(os.open(item.path, flags), "rb") as handle:
            data = handle.read()
            mtime_ns = os.fstat(handle.fileno()).st_mtime_ns
    except FileNotFoundError:
        raise ConflictError(
            f"{item.path} was deleted while the export ran: run the export again"
        ) from None
    except OSError as exc:
        raise StorageError(f"cannot read {item.path}: {exc.strerror}") from exc
    record: dict[str, Any] = {"kind": "file", "root": item.root, "path": item.rel}
    record["mtime_ns"] = mtime_ns
    try:
        record["text"] = data.decode("utf-8")
    except UnicodeDecodeError:
        record["base64"] = base64.b64encode(data).decode("ascii")
    return record


# -- import: decide and write --------------------------------------------------------------


def import_archive(
    memory: Memory, path: str, *, dry_run: bool = False, force: bool = False
) -> ImportReport:
    """Restore an archive (`path`, or "-" for stdin) into this store; see the module doc.
    Nothing is written before the whole archive has been read and checked."""
    if not dry_run:
        memory.require_writable("imported memory")  # U2, S: refused before reading anything
    holds = holdings(memory)
    if holds and not force:
        shown = ", ".join(holds[:3]) + (", ..." if len(holds) > 3 else "")
        raise ConflictError(
            f"the store {memory.state.path} is not empty (it holds {shown}): import into an "
            "empty state dir (--state-dir DIR), or merge into this one with --force"
        )
    from .archive_check import read_checked

    with _opened(path) as (source, name), memory.bulk():  # vectors after: embed_pending
        plan = read_checked(memory, source, name)
        report = ImportReport("memdir", name, dry_run, [], [])
        if not holds:
            rows = _restore_facts(memory, plan, report, dry_run)
        else:
            rows = _merge_facts(memory, plan, report, dry_run)
        rows.update(_other_rows(memory, plan, report, merge=bool(holds)))
        if not dry_run:
            memory.store.restore_rows(rows)
        # in team mode the view is refreshed once around the files, not before each one
        with contextlib.nullcontext() if dry_run else memory.docs.bulk():
            _write_files(memory, plan, source, report, dry_run, merge=bool(holds))
    if not dry_run:
        _rebuild(memory)
    return report


def holdings(memory: Memory) -> list[str]:
    """What makes the store not empty: facts, tasks, sessions, and any file an archive
    would carry (memory files, identity files)."""
    held = []
    if memory.store.exists():
        counts = memory.store.archive_counts()
        held += [
            f"{counts[kind]} {kind}(s)" for kind in ("fact", "task", "session") if counts[kind]
        ]
    found, _ = listing(memory.layout)
    held += [item.rel for item in found]
    return held


@contextlib.contextmanager
def _opened(path: str) -> Iterator[tuple[IO[bytes], str]]:
    """The archive, seekable (stdin is copied to a temp file first), and its name."""
    if path == "-":
        stdin = sys.stdin
        if stdin is None or stdin.isatty():
            raise ValidationError("'-' means the archive comes on stdin, but nothing was piped in")
        import shutil
        import tempfile

        with tempfile.TemporaryFile() as spool:
            shutil.copyfileobj(stdin.buffer, spool)
            spool.seek(0)
            yield spool, "stdin"
        return
    try:
        handle = open(path, "rb")
    except OSError as exc:
        raise ValidationError(f"cannot read {path}: {exc.strerror}") from None
    with handle:
        yield handle, path


def _restore_facts(
    memory: Memory, plan: CheckedArchive, report: ImportReport, dry_run: bool
) -> dict[str, list[Row]]:
    """An empty store: every fact with its own id and links, in one transaction."""
    facts = [row for _, row in plan.rows["fact"]]
    for number, row in plan.rows["fact"]:
        report.imported.append(ImportItem("fact", str(row["id"]), f"line {number}"))
    if not dry_run and facts:
        memory.import_facts(facts, keep_ids=True)
    return {"fact_usage": [row for _, row in plan.rows["fact_usage"]]}


def _merge_facts(
    memory: Memory, plan: CheckedArchive, report: ImportReport, dry_run: bool
) -> dict[str, list[Row]]:
    """A store that holds memory: new ids. A fact the store holds already (same category,
    text and creation time: imported before), or an active one whose text an active fact
    of the store says (the duplicate guard), is skipped, and links to it lead to it. The
    new facts go in with their links in one transaction."""
    has_db = memory.store.exists()
    known = memory.store.fact_identities() if has_db else {}
    held: dict[int, int] = {}
    new: list[tuple[int, Row]] = []
    for number, row in plan.rows["fact"]:
        same = known.get(FactIdentity(row["category"], row["content"], row["created"]))
        reason = f"the store holds it as fact {same}"
        if same is None and row["status"] == "active" and has_db:
            twin = memory.fact_saying(str(row["content"]))
            same, reason = (twin.id, f"duplicate of fact {twin.id}") if twin else (None, "")
        if same is not None:
            held[row["id"]] = same
            report.skipped.append(ImportItem("fact", str(same), f"line {number}", reason))
        else:
            new.append((number, row))
    if dry_run:
        report.imported.extend(ImportItem("fact", "new", f"line {n}") for n, _ in new)
        return {}
    stored = memory.import_facts([row for _, row in new], held=held) if new else {}
    report.imported.extend(
        ImportItem("fact", str(stored[row["id"]]), f"line {n}") for n, row in new
    )
    usage = [
        {**row, "fact_id": stored[row["fact_id"]]}
        for _, row in plan.rows["fact_usage"]
        if row["fact_id"] in stored
    ]
    return {"fact_usage": usage}


def _other_rows(
    memory: Memory, plan: CheckedArchive, report: ImportReport, merge: bool
) -> dict[str, list[Row]]:
    """Tasks, sessions (with what they wrote) and values; in a merge, those whose id or
    key the store holds already are skipped, and the store's own are kept."""
    rows: dict[str, list[Row]] = {}
    has_db = memory.store.exists()
    for kind, key in (("task", "id"), ("session", "id"), ("kv", "key")):
        found = plan.rows[kind]
        held = (
            memory.store.existing_keys(kind, [row[key] for _, row in found])
            if merge and has_db
            else set()
        )
        rows[kind] = []
        for number, row in found:
            if row[key] in held:
                reason = f"the store has a {kind} {row[key]} already; it was kept"
                report.skipped.append(ImportItem(kind, row[key], f"line {number}", reason))
            else:
                rows[kind].append(row)
                report.imported.append(ImportItem(kind, row[key], f"line {number}"))
    imported_sessions = {row["id"] for row in rows["session"]}
    rows["session_write"] = [
        row for _, row in plan.rows["session_write"] if row["session_id"] in imported_sessions
    ]
    return rows


def _write_files(
    memory: Memory,
    plan: CheckedArchive,
    source: IO[bytes],
    report: ImportReport,
    dry_run: bool,
    merge: bool,
) -> None:
    import base64
    import json

    layout = memory.layout
    for number, offset, root, rel, refused in plan.files:
        item = ImportItem(file_kind(root, rel), rel, f"line {number}")
        if refused is not None:
            report.skipped.append(item._replace(reason=refused))
            continue
        source.seek(offset)
        record = json.loads(source.readline().decode("utf-8"))
        text = record.get("text")
        data = text if text is not None else base64.b64decode(record["base64"])
        target = safe_path(root_dir(layout, root), rel)  # X1, again: now, as it is written
        if _holds_already(target, data):
            report.skipped.append(item._replace(reason="the store's file is the same"))
            continue
        replaces = os.path.exists(target)
        if replaces and root == "memory" and rel == "HOT.md.bak" and merge:
            # a merge keeps this store's own backup of HOT.md (written below), not the other's
            report.skipped.append(item._replace(reason="the store keeps its own HOT.md.bak"))
            continue
        if replaces:
            kept = " (the previous one kept in HOT.md.bak)" if rel == "HOT.md" else ""
            item = item._replace(note=f"replaced the store's {rel}{kept}")
        report.imported.append(item)
        if not dry_run:
            _write_file(memory, root, rel, target, data, record.get("mtime_ns"))


def _write_file(
    memory: Memory, root: str, rel: str, target: str, data: str | bytes, mtime: int | None
) -> None:
    """One file of the archive, under the lock its writers take. A document (HOT.md, a
    daily log, an entry...: is_document) goes through the memory root's documents, so in
    team mode it is the scope's row, rendered here and on every machine (W1); what replaced
    HOT.md is the stored text, kept in this machine's HOT.md.bak (H4); the row keeps the
    file's time to the second (its updated_at), which every view's render gives the file,
    so what was distilled before the export is not handed out again (D1). The rest
    (identity files, HOT.md.bak, bytes that are not text, anything else) is a file of this
    machine."""
    base = root_dir(memory.layout, root)
    lock = lock_of(rel) if root == "memory" else None
    with files.locked(memory.layout.locks_dir, lock) if lock else contextlib.nullcontext():
        if root == "memory" and isinstance(data, str) and is_document(rel):
            text = data

            def change(current: str | None) -> str:
                if current is not None and rel == "HOT.md":  # H4: the previous is kept
                    files.sweep_temps(os.path.join(base, "HOT.md.bak"), root=base)
                    files.atomic_write(os.path.join(base, "HOT.md.bak"), current, root=base)
                return text

            at = None if mtime is None else mtime / 1e9
            memory.docs.put(target, None, change, at)  # None: the lock is held here
            if memory.docs.shared:
                return  # the view renders the file with its row's time (settle_mtime)
        else:
            if lock:
                files.sweep_temps(target, root=base)
            if isinstance(data, str):
                files.atomic_write(target, data, root=base)
            else:
                files.ensure_dir(os.path.dirname(files.confined(base, target)))
                with files.atomic_output(target, root=base) as out:
                    out.write(data)
        if mtime is not None:
            try:
                os.utime(target, ns=(mtime, mtime), follow_symlinks=False)
            except OSError as exc:
                raise StorageError(f"cannot set the time of {target}: {exc.strerror}") from exc


def _holds_already(target: str, data: str | bytes) -> bool:
    try:
        with os.fdopen(os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "rb") as handle:
            held = handle.read()
    except OSError:
        return False
    return held == (data.encode("utf-8") if isinstance(data, str) else data)


def _rebuild(memory: Memory) -> None:
    """What is derived from the files: MEMORY.md, the entry cache, the search index
    (reindex's first two steps; `memdir import` embeds next, or reindex, or the server)."""
    from .. import entries
    from ..search import index

    entries.reindex(memory.layout, memory.store)
    index.sync(memory.layout, memory.store, full=True)


FILE_KINDS = {"global": "entry", "procedures": "procedure", "tasks": "note", "daily": "daily"}
TOP_FILES = {
    "HOT.md": "hot",
    "HOT.md.bak": "hot",
    HOT_OVERFLOW: "hot",
    "heartbeat-state.json": "heartbeat",
}


def file_kind(root: str, rel: str) -> str:
    """What a file is, as an import reports it: hot, entry, procedure, note, daily..."""
    if root == "state":
        return "identity"
    folder, _, name = rel.rpartition("/")
    if not folder:
        return TOP_FILES.get(name, "file")
    return FILE_KINDS.get(folder, "file")
