"""The records that cross the Store boundary (base.py): every row a store takes or gives
has named fields, whatever the backend keeps it in. Tuples underneath (`Record`), so they
cost no import and unpack as before."""

from __future__ import annotations

from ..models import Fact
from ..records import Record


class FileState(Record):
    """What the search index knows of one markdown file: a changed file is re-chunked."""

    kind: str
    mtime_ns: int
    size: int
    hash: str


class NewChunk(Record):
    """One chunk of a markdown file, about to be stored."""

    start_line: int
    end_line: int
    date: str | None
    content: str
    hash: str


class FileChunks(Record):
    """One file's new state and its chunks (None: its text did not change, only its state)."""

    path: str
    state: FileState
    chunks: list[NewChunk] | None


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


class ProcedurePrint(Record):
    """A procedure's fingerprint when last read, valid while (mtime_ns, size) hold."""

    mtime_ns: int
    size: int
    body_key: int | None
    sketch: str


class Unembedded(Record):
    """A fact or chunk with no vector of a model yet: what to embed, and its text's hash."""

    owner: str  # fact | chunk
    owner_id: int
    text: str
    hash: str


class NewVector(Record):
    owner: str
    owner_id: int
    hash: str
    vec: bytes


class StoredVector(Record):
    owner: str
    owner_id: int
    vec: bytes


class VectorGeneration(Record):
    """How many vectors of a model there are, and the highest id: a cached matrix is
    current while both hold."""

    n: int
    top: int


class FactSize(Record):
    n: int  # facts
    chars: int  # characters of content


class NewFact(Record):
    category: str
    content: str


class Superseded(Record):
    old: Fact  # now superseded (or, when nothing changed, the fact as it was)
    new: Fact  # the active version


class FactPair(Record):
    """Two active facts that may say the same (near-duplicate candidates), lower id first."""

    first: Fact
    second: Fact


class FactIdentity(Record):
    """What tells one fact record from another across stores: an import finds by it the
    facts it brought in before."""

    category: str
    content: str
    created: str


class DatabaseHealth(Record):
    """What doctor reads of a store's database (its `db.*` checks)."""

    problems: list[str]  # the integrity check's answer: ["ok"] when sound, else up to 20
    schema: int  # the schema version the database is at
    latest: int  # the schema version this memdir writes
    bytes: int
    free_bytes: int


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
