"""Global entries (G1-G5): memory/global/<name>.md, YAML frontmatter plus a markdown body,
and memory/MEMORY.md, the derived one-line-per-entry index.

The files are the source of truth. What their frontmatter says is cached in memory.db,
keyed by each file's (mtime, size), so listing and recall see hand edits and deletions at
once (G4) without parsing every file every time. All writes to global/ and MEMORY.md take
one lock, so the index is regenerated from a consistent folder and never half-written.
"""

from __future__ import annotations

import os

from . import advice, revisions
from .errors import MemdirError, NotFoundError, ValidationError
from .lazy import lazy
from .models import Entry, Similar
from .names import are_names, is_name
from .paths import ENTRIES_LOCK, Layout
from .storage import files, frontmatter, watched
from .storage.rows import CachedEntry

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from . import similarity
    from .storage.base import Store

    Listed = tuple[tuple[str, str, str | None], ...]
    from .storage.documents import Documents
else:
    similarity = lazy("memdir.similarity")  # only when a file changed or a write compares

DESCRIPTION_MAX = 300
LOCK = ENTRIES_LOCK


def check_description(description: object) -> str:
    """G1: one line. Line breaks an agent put in are folded into spaces."""
    if not isinstance(description, str) or not description.strip():
        raise ValidationError("an entry needs a description: one line saying what it holds")
    text = " ".join(description.split())
    if len(text) > DESCRIPTION_MAX:
        raise ValidationError(
            f"the description is {len(text)} characters; keep it to one line of at most "
            f"{DESCRIPTION_MAX} and put the rest in the content"
        )
    return text


def write(
    layout: Layout,
    store: Store,
    name: str,
    description: str,
    content: str,
    now: str,
    provenance: dict[str, str | None],
    twins: Callable[[], tuple[Similar, ...]] | None = None,
    expected: str | None = None,
    docs: Documents | None = None,
) -> tuple[Entry, bool]:
    """G2 upsert: (the entry, True if it was created). Rewriting keeps `created`. The name
    is the identity (X5): a write that repeats the entry exactly (same description and
    body) rewrites nothing and comes back `duplicate`; any other write is stored. `twins`
    (the duplicate guard) names the other entries this body resembles; it runs under the
    lock, so what it compares with is not being rewritten meanwhile. `expected`: the
    revision of the file the change was made from (V4); another one is refused. In team
    mode (`docs` shared) the checks and the write are on the stored row (W1)."""
    path = layout.entry(name)
    description = check_description(description)
    body = content.strip("\n") + "\n"
    done: dict[str, Any] = {}

    def change(text: str | None) -> str | None:
        revisions.check(expected, text, f"entry {name}")
        previous = _meta_of(text, path, layout)
        if previous and _holds(text, previous, name, description, body):
            return text
        similar = twins() if twins is not None else ()
        created = now if previous is None else str(previous.get("created") or now)
        meta: dict[str, object] = {"name": name, "description": description}
        meta.update(_provenance(previous, provenance))
        meta.update({"created": created, "updated": now})
        done.update(similar=similar, previous=previous, created=created, meta=meta)
        return frontmatter.dump(meta, body)

    with files.locked(layout.locks_dir, LOCK):  # held through MEMORY.md's rewrite below
        _documents(layout, docs).change(path, None, change, now)
        if not done:
            return read(layout, name)._replace(duplicate=True), False
        _write_index(layout, store)
    similar, previous, created, meta = (
        done["similar"],
        done["previous"],
        done["created"],
        done["meta"],
    )
    entry = Entry(
        name,
        description,
        _rel(path, layout),
        _str(meta.get("agent")),
        _str(meta.get("task")),
        _str(meta.get("workflow")),
        created,
        now,
        body,
        similar=similar,
        updated_by=_str(meta.get("updated_by")),
    )
    return entry, previous is None


def _holds(
    text: str | None, meta: dict[str, object], name: str, description: str, body: str
) -> bool:
    """The file (`text`, its frontmatter `meta`) says exactly this already: the same name,
    description and body (X5)."""
    return (
        text is not None
        and meta.get("name") == name
        and meta.get("description") == description
        and frontmatter.split(text)[1] == body
    )


def _provenance(
    previous: dict[str, object] | None, provenance: dict[str, str | None]
) -> dict[str, object]:
    """G1, G2: `agent` is who created the entry, kept through every upsert whoever writes;
    the agent of the latest update is `updated_by` (left out when that update names none,
    so a stale name is never shown). `task` and `workflow` are the latest ones named: a
    write that names none keeps the earlier. A file whose frontmatter cannot be read has
    no creator to keep: this write creates it."""
    if not previous:
        return {k: v for k, v in provenance.items() if v}
    kept: dict[str, object] = {}
    if previous.get("agent"):
        kept["agent"] = previous["agent"]
    for key in ("task", "workflow"):
        value = provenance.get(key) or previous.get(key)
        if value:
            kept[key] = value
    if provenance.get("agent"):
        kept["updated_by"] = provenance["agent"]
    return kept


def read(layout: Layout, name: str) -> Entry:
    path = layout.entry(name)
    text = _read_inside(path, layout)
    if text is None:
        raise NotFoundError(
            f"no global entry named {name!r}: the entries are in {advice.entry_list()}",
            kind="entry",
            key=name,
        )
    entry = _entry_from(name, text, path, layout)
    try:
        _meta, body = frontmatter.parse(text, _rel(path, layout))
    except ValidationError:
        body = text
    return entry._replace(content=body)


def text_of(layout: Layout, name: str) -> str | None:
    """The file's whole text (frontmatter too), None when it is gone; a symlink out of the
    memory root is refused (X1)."""
    return _read_inside(layout.entry(name), layout)


def remove(layout: Layout, store: Store, name: str, docs: Documents | None = None) -> Entry:
    """Delete the entry (in team mode its stored row, W1); MEMORY.md follows."""
    entry = read(layout, name)
    gone = NotFoundError(
        f"no global entry named {name!r}: the entries are in {advice.entry_list()}",
        kind="entry",
        key=name,
    )

    with files.locked(layout.locks_dir, LOCK):  # held through MEMORY.md's rewrite below
        if not _documents(layout, docs).remove(layout.entry(name), None):
            raise gone
        _write_index(layout, store)
    return entry


def _documents(layout: Layout, docs: Documents | None) -> Documents:
    """The memory root's documents (W1): the files, or in team mode the scope's rows."""
    if docs is not None:
        return docs
    from .storage.documents import Documents

    return Documents(layout.memory_dir)


def follow_view(layout: Layout, store: Store) -> None:
    """Team mode (W1): entries were rendered from the rows; MEMORY.md follows them."""
    with files.locked(layout.locks_dir, LOCK):
        _write_index(layout, store)


def list_all(layout: Layout, store: Store) -> list[Entry]:
    """Every entry, by name; one whose frontmatter is broken is listed with its error."""
    import json

    rows = _refresh(layout, store)
    return [Entry(**json.loads(rows[name][5])) for name in sorted(rows)]


def index(layout: Layout, store: Store) -> list[tuple[str, str, str | None]]:
    """(name, description, updated) of every readable entry, by name: what MEMORY.md,
    recall, boot and the session hooks show. What the listing said last time is kept
    whole (Store.entry_listing: [[name, [mtime_ns, size, description, updated, error]],
    ...]); when every file's (mtime, size) is still the one it holds, that
    is the answer: a stat a file and no row a file. Otherwise the cache is refreshed and
    the snapshot taken anew. A process that lives on keeps the answer while inotify says
    global/ is unchanged (storage/watched.py): no stat at all."""
    listed = watched.kept(layout.global_dir, INDEX_KEY, lambda: _index(layout, store))
    return list(listed) if isinstance(listed, tuple) else []


def warm(layout: Layout, store: Store) -> None:
    """Keep index's answer under a watch where the kept listing holds, writing nothing
    (the fork server readying its next calls, cli/forkserver.py)."""
    watched.kept(layout.global_dir, INDEX_KEY, lambda: _index(layout, store, refresh=False))


INDEX_KEY = "entries.index"


def _index(layout: Layout, store: Store, refresh: bool = True) -> tuple[Listed | None, bool]:
    """(index's answer, whether it may be kept under a watch: it was checked against
    every file, and none is a link, whose changes the folder's watch would not see).
    Without `refresh`, (None, False) where the kept listing no longer holds."""
    snapshot = _snapshot(store)
    checked = None if snapshot is None else _unchanged(layout, snapshot)
    if snapshot is not None and checked is not None:
        rows: dict[str, Any] = snapshot
    elif refresh:
        rows = _refresh(layout, store, with_meta=False, with_prints=False, keep_listing=True)
    else:
        return None, False
    listed = tuple((n, rows[n][2], rows[n][3]) for n in sorted(rows) if rows[n][4] is None)
    return listed, checked is True


def _snapshot(store: Store) -> dict[str, list[Any]] | None:
    """name -> [mtime_ns, size, description, updated, error] as the store keeps it, or None
    (none taken, or not one: then the rows)."""
    import json

    try:
        text = store.entry_listing()
        if text is None:
            return None
        snapshot = dict(json.loads(text))
    except (MemdirError, ValueError, TypeError):
        return None
    return snapshot if are_names(list(snapshot)) else None  # X1, whatever memory.db says


def _unchanged(layout: Layout, snapshot: dict[str, list[Any]]) -> bool | None:
    """Whether global/ holds exactly the entry files of `snapshot`, each with its (mtime,
    size): one pass, a stat a file, nothing built. None: it does not; False: it does, but
    some file is a symlink or has another hard link (a change made through those raises
    no event in global/); True: it does, all plain files."""
    get = snapshot.get
    seen = 0
    plain = True
    for item in files.scandir(layout.global_dir, root=layout.memory_dir):
        name = item.name
        if not name.endswith(".md"):
            continue
        row = get(name[:-3])
        if row is None:
            if is_name(name[:-3]):
                return None  # a new entry
            continue
        try:
            info = item.stat()
        except OSError:
            return None
        if info.st_mtime_ns != row[0] or info.st_size != row[1]:
            return None
        if info.st_nlink != 1 or item.is_symlink():
            plain = False
        seen += 1
    return plain if seen == len(snapshot) else None


def _listing_text(rows: dict[str, CachedEntry]) -> str:
    import json

    return json.dumps([[name, list(row[:5])] for name, row in sorted(rows.items())])


def fingerprints(layout: Layout, store: Store) -> dict[str, tuple[int | None, set[int]]]:
    """name -> (the key of its normalised body, its LSH band keys) of every readable entry:
    what the duplicate guard compares a new body with before reading any file."""
    rows = _refresh(layout, store, with_meta=False)
    return {
        name: (row[6], similarity.bands_of(row[7])) for name, row in rows.items() if row[4] is None
    }


def reindex(layout: Layout, store: Store) -> list[Entry]:
    """G3: rebuild MEMORY.md (and the cache) from the files alone."""
    with files.locked(layout.locks_dir, LOCK):
        _refresh(layout, store, trust_cache=False, keep_listing=True)  # trusts no cache
        _write_index(layout, store)
    return list_all(layout, store)


def index_line(name: str, description: str) -> str:
    return f"- {name} — {description}"


def _write_index(layout: Layout, store: Store) -> None:
    text = "".join(
        index_line(name, description) + "\n" for name, description, _ in index(layout, store)
    )
    if files.read_text(layout.index_file, root=layout.memory_dir) != text:
        files.sweep_temps(layout.index_file, root=layout.memory_dir)
        files.atomic_write(layout.index_file, text, root=layout.memory_dir)


def _refresh(
    layout: Layout,
    store: Store,
    trust_cache: bool = True,
    with_meta: bool = True,
    with_prints: bool = True,
    keep_listing: bool = False,
) -> dict[str, CachedEntry]:
    """What every file of global/ says now: the cached row when its (mtime, size) is the
    one cached, else the file parsed again (G4). The cache is brought up to date (a row
    read without its metadata or keys is never written back: only changed rows are);
    with `keep_listing`, the whole listing is kept too (index)."""
    try:
        cache = store.entry_cache(with_meta, with_prints)
    except MemdirError:
        cache, trust_cache = {}, False  # a broken memory.db must not hide the files (Z)
    current: dict[str, CachedEntry] = {}
    changed: dict[str, CachedEntry] = {}
    bodies: dict[str, str] = {}
    known = cache if trust_cache else {}
    for name, path, mtime_ns, size, cached in _listing(layout, known):
        if cached is not None and cached[0] == mtime_ns and cached[1] == size:
            current[name] = cached
            continue
        entry, body = _load(name, path, layout)
        if entry is None:
            continue  # deleted while we looked
        if body is not None:
            bodies[name] = body
        import json  # only for a file that changed (~1 ms of imports)

        row = CachedEntry(
            mtime_ns,
            size,
            entry.description,
            entry.updated,
            entry.error,
            json.dumps(entry._asdict()),
            None,
            "",
        )
        current[name] = changed[name] = row
    if bodies:  # the duplicate guard's fingerprints of what changed, in one batch
        names = list(bodies)
        prints = similarity.fingerprints([bodies[n] for n in names])
        for name, fingerprint in zip(names, prints, strict=True):
            current[name] = changed[name] = changed[name]._replace(
                body_key=fingerprint[0], sketch=fingerprint[1]
            )
    gone = [name for name in cache if name not in current]
    listing = _listing_text(current) if keep_listing else None
    try:
        if changed or gone:
            store.update_entry_cache(changed, gone, listing)  # one transaction for both
        elif listing is not None and store.entry_listing() != listing:
            store.set_entry_listing(listing)
    except MemdirError:
        pass  # only a cache: a read-only or locked database must not break reading
    return current


def files_of(layout: Layout) -> list[tuple[str, str, int, int]]:
    """(name, path, mtime_ns, size) of each entry file."""
    return [item[:4] for item in _listing(layout, {})]


def _listing(
    layout: Layout, cache: dict[str, CachedEntry]
) -> list[tuple[str, str, int, int, CachedEntry | None]]:
    """(name, path, mtime_ns, size, its cached row or None) of each entry file: one stat a
    file and nothing else, since recall, boot and every hook list all of them each call."""
    folder = layout.global_dir
    prefix = os.path.join(folder, "")  # os.path.join(folder, name), once: recall and boot
    listing = [
        item
        for item in files.scandir(folder, root=layout.memory_dir)  # every entry, each call
        if item.name.endswith(".md")
    ]
    stems = [item.name[:-3] for item in listing]
    if not are_names(stems):  # one regex over all: only a stray file costs a test each
        kept = [(item, stem) for item, stem in zip(listing, stems, strict=True) if is_name(stem)]
        listing, stems = [item for item, _ in kept], [stem for _, stem in kept]
    found = []
    get = cache.get
    for item, stem in zip(listing, stems, strict=True):
        try:
            info = item.stat()
        except OSError:
            continue  # a dangling symlink, or deleted while we looked
        found.append((stem, prefix + item.name, info.st_mtime_ns, info.st_size, get(stem)))
    return found


def _load(name: str, path: str, layout: Layout) -> tuple[Entry | None, str | None]:
    """(the entry, its body when the file parsed), or (None, None) when it is gone."""
    try:
        text = _read_inside(path, layout)
    except MemdirError as exc:  # a link out, a folder named x.md, unreadable: listed with it
        return Entry(name, "", _rel(path, layout), error=str(exc)), None
    if text is None:
        return None, None
    entry = _entry_from(name, text, path, layout)
    if entry.error is not None:
        return entry, None
    return entry, frontmatter.split(text)[1]


def _read_inside(path: str, layout: Layout) -> str | None:
    return files.read_inside(layout.memory_dir, path, _rel(path, layout))


def _entry_from(name: str, text: str, path: str, layout: Layout) -> Entry:
    rel = _rel(path, layout)
    try:
        meta, _body = frontmatter.parse(text, rel)
    except ValidationError as exc:
        return Entry(name, "", rel, error=str(exc))
    description = meta.get("description")
    return Entry(
        name=name,
        description=" ".join(str(description).split()) if description else "(no description)",
        path=rel,
        agent=_str(meta.get("agent")),
        task=_str(meta.get("task")),
        workflow=_str(meta.get("workflow")),
        created=_str(meta.get("created")),
        updated=_str(meta.get("updated")),
        updated_by=_str(meta.get("updated_by")),
    )


def _meta_of(text: str | None, path: str, layout: Layout) -> dict[str, object] | None:
    if text is None:
        return None
    try:
        meta, _ = frontmatter.parse(text, _rel(path, layout))
    except ValidationError:
        return {}
    return dict(meta)


def _str(value: object) -> str | None:
    return None if value is None else str(value)


def _rel(path: str, layout: Layout) -> str:
    return os.path.relpath(path, layout.memory_dir)
