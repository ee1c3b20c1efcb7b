"""The rest of the records that cross the Store boundary (rows.py has those of reads):
rows that only writes, re-indexing a changed file, embedding, stats, curation, doctor
and the archive build. Apart
from rows.py so that a search or a boot, which never builds one, does not pay to define
them (~50 us each). Modules import them where they build them.
"""

from __future__ import annotations

from ..records import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..models import Fact
    from .rows import FileState


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


class RankedVector(Record):
    """A vector the store ranked for a question (rank_vectors): its owner and the inner
    product (the cosine, vectors being unit length)."""

    owner: str
    owner_id: int
    score: float


class VectorFilter(Record):
    """The candidates a ranking in the store keeps, as the search's own filters (Q1):
    facts when `kinds` has "fact", active, of `category`, made since `since`; chunks of
    the other kinds, dated since `since`, and none when a category is asked."""

    kinds: tuple[str, ...]
    category: str | None
    since: str | None


class VectorGeneration(Record):
    """How many vectors of a model there are, the highest id, and how many were ever
    removed or replaced: a cached matrix is current while all three hold. The removals
    tell what the first two cannot where ids are reused (a SQLite rowid after its top
    row went: superseding the newest fact left a warm matrix with the old fact)."""

    n: int
    top: int
    removed: int = 0


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
