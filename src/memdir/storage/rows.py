"""The records that cross the Store boundary (base.py): every row a store takes or gives
has named fields, whatever the backend keeps it in, and a search crosses it as a parsed
query tree (Word, Op), which query.py builds and validates from what the user typed and
each backend renders in its own syntax (SQLite: sqlite/index.py's to_fts5), so user text
never reaches a backend's query language as typed.

Tuples underneath (`Record`), so they unpack as before. These are the ones a read (a
search, a boot) builds; rows_cold.py holds the rest, which only writes, re-indexing,
embedding, stats, curation and the archive build: each record costs ~50 us to define,
on every start of the CLI that imports it.
"""

from __future__ import annotations

from ..query import Node as Node  # the parsed search query (Q2, F4) crosses as query.py
from ..query import Op as Op  # builds it
from ..query import Word as Word
from ..records import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from ..models import Fact


# -- rows ---------------------------------------------------------------------------------


class FileState(Record):
    """What the search index knows of one markdown file: a changed file is re-chunked."""

    kind: str
    mtime_ns: int
    size: int
    hash: str


class Chunk(Record):
    """One stored chunk of a markdown file (Q1)."""

    id: int
    path: str
    kind: str
    start_line: int
    end_line: int
    date: str | None
    content: str


class ScoredFact(Record):
    fact: Fact
    score: float  # higher is better; its scale is the backend's (bm25, Jaccard)


class ScoredChunk(Record):
    chunk: Chunk
    score: float


class CachedEntry(Record):
    """What a global entry file said when last read, valid while (mtime_ns, size) hold (G4)."""

    mtime_ns: int
    size: int
    description: str
    updated: str | None
    error: str | None
    meta: str  # the whole Entry as JSON ("" when not asked for)
    body_key: int | None  # similarity.text_key of the body
    sketch: str  # its LSH band keys, space-separated


# The archive (curation's export/import): the kinds of rows that hold memory, and the
# fields of each, whatever the backend names its tables and columns.
FACT_FIELDS = (
    "id",
    "category",
    "content",
    "status",
    "created",
    "updated",
    "supersedes",
    "superseded_by",
    "session_id",
    "surface",
    "agent",
    "valid_from",
    "valid_to",
)
ARCHIVE_FIELDS: dict[str, tuple[str, ...]] = {
    "fact": FACT_FIELDS,
    "fact_usage": ("fact_id", "hits", "last_hit"),
    "task": ("id", "parent_id", "state", "started", "ended"),
    "session": ("id", "surface", "parent_id", "started", "ended"),
    # an archive record's own `kind` names the record: a write's kind travels as `what`
    "session_write": ("session_id", "what", "n"),
    "kv": ("key", "value"),
}
ARCHIVE_KINDS = tuple(ARCHIVE_FIELDS)  # fact, fact_usage, task, session, session_write, kv

# A fact's history (F3): its first version and every version whose `supersedes` leads back
# there, which a fork (two successors of one fact) makes a tree. FORK_POINTS: the facts
# with two or more successors (the facts that supersede them, and the one they are
# superseded by), in the SQL both backends speak.
FORK_POINTS = (
    "SELECT id FROM (SELECT supersedes AS id, id AS next FROM facts WHERE supersedes IS NOT "
    "NULL UNION SELECT id, superseded_by FROM facts WHERE superseded_by IS NOT NULL) AS links "
    "GROUP BY id HAVING count(*) > 1 ORDER BY id"
)


def history(root: Fact, successors: Callable[[list[Fact]], list[Fact]]) -> list[Fact]:
    """`root` and its versions, oldest first: each branch of a fork in turn, depth first
    (a version comes after the one it supersedes). `successors(facts)`: the facts that
    supersede one of them or that one of them is superseded by, a generation at a time."""
    children: dict[int, list[Fact]] = {}
    seen, generation = {root.id: root}, [root]
    while generation:
        later = {f.id: f for f in successors(generation) if f.id not in seen}
        for f in later.values():
            seen[f.id] = f
            children.setdefault(f.supersedes or 0, []).append(f)
        generation = list(later.values())
    order: list[Fact] = []
    todo = [root]
    while todo:
        fact = todo.pop()
        order.append(fact)
        todo.extend(sorted(children.pop(fact.id, []), key=lambda f: -f.id))
    shown = {f.id for f in order}  # a version linked to none of the others shows last
    return order + sorted((f for f in seen.values() if f.id not in shown), key=lambda f: f.id)


def successor_ids(generation: list[Fact]) -> tuple[list[int], list[int]]:
    """What a backend looks up for history(): the rows `generation` is superseded by (by
    id), and the rows naming one of its superseded facts (by the index on `supersedes`):
    only a superseded fact can have a second successor (an active or removed one has
    none), so a history that ends in its active version looks nothing up for it.
    (superseded ids, successor ids)"""
    ids = [f.id for f in generation if f.status == "superseded"]
    targets = [f.superseded_by for f in generation if f.superseded_by is not None]
    return ids, targets
