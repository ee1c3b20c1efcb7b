"""The Store protocol: everything the facade and the concept modules ask of the storage
layer, and nothing of how a backend keeps it. It imports no backend: a PostgreSQL store is
a package beside sqlite/ that satisfies these protocols (and passes
tests/test_store_contract.py); `open_store` (storage/__init__.py) is the one place that
chooses it.

Rows cross the boundary as records (rows.py); a search crosses it as a parsed query tree
(rows.Word, rows.Op), already validated, which each backend renders in its own syntax. Narrow
protocols name what each part of memdir needs; `Store` is all of them. Imported for type
checking only: `typing` costs the CLI's cold path ~6 ms.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Protocol

from ..models import Fact, Provenance, Session, Task
from .rows import CachedEntry, Chunk, FileState, Node, ScoredChunk, ScoredFact
from .rows_cold import (
    DatabaseHealth,
    FactIdentity,
    FactPair,
    FactSize,
    FileChunks,
    NewChunk,
    NewFact,
    NewVector,
    ProcedurePrint,
    RankedVector,
    StoredVector,
    Superseded,
    Unembedded,
    VectorFilter,
    VectorGeneration,
)

__all__ = [
    "ArchiveStore",
    "CacheStore",
    "CachedEntry",
    "Chunk",
    "CurationStore",
    "FactStore",
    "FileState",
    "HealthStore",
    "IndexStore",
    "NewChunk",
    "SessionStore",
    "Store",
]

Row = dict[str, object]  # an archive record's fields (rows.ARCHIVE_FIELDS) -> values


class FactStore(Protocol):
    """Facts and their validity windows (F1-F5)."""

    def add_fact(
        self, category: str, content: str, now: str, by: Provenance, valid_from: str | None = None
    ) -> Fact:
        """A new active fact, or the active fact that says the same, marked `duplicate`."""
        ...

    def add_facts(
        self,
        rows: list[NewFact],
        now: str,
        by: Provenance,
        check: Callable[[Sequence[NewFact]], None] | None = None,
    ) -> list[int]:
        """Bulk: the id of each row, an exact duplicate's being the fact it repeats.
        `check(part)` is called on the rows, in parts, in order, before they are
        committed; if it raises, nothing is written (an import holding a secret)."""
        ...

    def supersede_fact(
        self,
        old_id: int,
        category: str | None,
        content: str,
        now: str,
        by: Provenance,
        valid_from: str | None = None,
    ) -> Superseded:
        """The old fact, now superseded, and the new active one, in one transaction. An
        old fact superseded already (not removed) is kept as it is and gets a second
        successor: a fork (F3). Text an active version of the same history says already:
        that version, marked duplicate if the old fact is superseded, else the old fact
        ends in it (a fork settled, no new row)."""
        ...

    def remove_fact(self, fact_id: int, now: str) -> Fact: ...

    def recent_facts(self, limit: int) -> list[Fact]:
        """V2: the `limit` facts written or changed last (added, superseded, removed), the
        latest change first (by `updated`, then id)."""
        ...

    def get_fact(self, fact_id: int) -> Fact | None: ...

    def facts_by_id(self, ids: list[int]) -> dict[int, Fact]: ...

    def fact_chain(self, fact_id: int) -> list[Fact]:
        """Every version of the history fact_id belongs to, oldest first; a fork's
        branches one after the other, each after the version it supersedes (rows.history)."""
        ...

    def forked_facts(self) -> list[int]:
        """The facts superseded twice or more (rows.FORK_POINTS), whether or not settled."""
        ...

    def search_facts(
        self,
        query: Node,
        category: str | None,
        since: str | None,
        limit: int,
        as_of: str | None = None,
        *,
        question: bool = False,
    ) -> list[ScoredFact]:
        """Active facts matching the query, best first, with a score (higher = better);
        with `as_of`, the facts that held at that time, superseded ones included.
        `question`: the query is the OR of a plain question's words (query.parse_search),
        which a backend may rank over a bounded candidate set (F4); any other query is
        ranked in full."""
        ...

    def count_facts(self) -> dict[str, int]:
        """status -> how many facts have it."""
        ...

    def size_of_facts(self) -> dict[str, FactSize]:
        """status -> (count, characters of content)."""
        ...


class SessionStore(Protocol):
    """Sessions (U1-U4) and the task registry (T3)."""

    def start_session(
        self,
        session_id: str,
        surface: str,
        parent_id: str | None,
        now: str,
        values: tuple[tuple[str, str], ...] = (),
    ) -> Session:
        """Record a new session, and set `values` (key, value) in the same transaction: a
        host's SessionStart is one durable write, not two (K3)."""
        ...

    def get_session(self, session_id: str) -> Session | None: ...

    def end_session(self, session_id: str, now: str) -> Session: ...

    def reopen_session(self, session_id: str) -> Session:
        """The session is open again (a host resumed it, U1); its counts carry on."""
        ...

    def list_sessions(self, limit: int) -> list[Session]:
        """Top-level sessions, newest first."""
        ...

    def count_write(self, session_id: str, kind: str) -> None: ...

    def start_task(self, task_id: str, parent_id: str | None, now: str) -> Task: ...

    def end_task(self, task_id: str, state: str, now: str) -> Task: ...

    def get_task(self, task_id: str) -> Task | None: ...

    def all_tasks(self) -> list[Task]: ...


class CacheStore(Protocol):
    """What files said when last read (G4, the procedures' prints) and small named values."""

    def entry_cache(
        self, with_meta: bool = True, with_prints: bool = True
    ) -> dict[str, CachedEntry]:
        """name -> what a global entry file said when last read, keyed by (mtime, size);
        without `with_prints` the body key and band keys are left out (None, "")."""
        ...

    def update_entry_cache(
        self, changed: dict[str, CachedEntry], gone: list[str], listing: str | None = None
    ) -> None:
        """Rows changed and gone; with `listing`, the whole listing too, in the same
        transaction (entry_listing)."""
        ...

    def entry_listing(self) -> str | None:
        """The listing of global/ kept whole (JSON, entries.SNAPSHOT), or None."""
        ...

    def set_entry_listing(self, text: str) -> None:
        """Keep `text` as the listing; nothing where there is no database yet (as
        update_entry_cache)."""
        ...

    def procedure_prints(self) -> dict[str, ProcedurePrint]: ...

    def update_procedure_prints(
        self, changed: dict[str, ProcedurePrint], gone: list[str]
    ) -> None: ...

    def get_value(self, key: str) -> str | None: ...

    def set_value(self, key: str, value: str) -> None: ...


class IndexStore(Protocol):
    """The search index (Q1-Q3): chunks of the markdown files and the vectors."""

    def indexed_files(self) -> dict[str, FileState]: ...

    def replace_chunks(self, changes: list[FileChunks], gone: list[str]) -> None:
        """One transaction: each changed file's state and chunks replace its old ones."""
        ...

    def search_chunks(
        self,
        query: Node,
        kinds: tuple[str, ...],
        since: str | None,
        limit: int,
        *,
        question: bool = False,
    ) -> list[ScoredChunk]:
        """Chunks of these kinds matching, best first; `question` as in search_facts."""
        ...

    def chunks_by_id(self, ids: list[int]) -> dict[int, Chunk]: ...

    def has_groups(self) -> bool:
        """Q3: whether the store holds any group document (a session's facts, a file)."""
        ...

    def group_scores(self, query: Node, pages: Collection[int] | None = None) -> dict[int, float]:
        """Q3: group document id -> its bm25 (higher is better), for the documents that
        match: pages of a session's facts in the order written, a file's chunks. With
        `pages`, at least those of them that match and the best matching document (each
        score the same as in the full answer, which is a right answer too): what scoring
        those pages as a share of the best needs."""
        ...

    def group_pages(self, owners: list[str]) -> dict[str, list[tuple[int, int, int]]]:
        """Q3: owner (`session:<id>`, `file:<path>`) -> its group documents as (first
        member id, last member id, document id), in order."""
        ...

    def fact_neighbours(self, ids: list[int]) -> dict[int, tuple[str, int | None, int | None]]:
        """Q3: fact id -> (its session, the active facts that session wrote just before and
        after it); facts of no session are left out."""
        ...

    def chunk_neighbours(self, ids: list[int]) -> dict[int, tuple[int | None, int | None]]:
        """Q3: chunk id -> the chunks just above and below it in its file."""
        ...

    def unembedded(self, model: str, limit: int) -> list[Unembedded]: ...

    def unembedded_items(
        self, model: str, fact_ids: list[int], paths: list[str]
    ) -> list[Unembedded]:
        """As unembedded, for these facts and the chunks of these files only."""
        ...

    def count_unembedded(self, model: str) -> int: ...

    def vectors_by_hash(self, model: str, hashes: list[str]) -> dict[str, bytes]: ...

    def put_vectors(self, model: str, rows: list[NewVector]) -> None:
        """An owner gone meanwhile is skipped."""
        ...

    def vector_generation(self, model: str) -> VectorGeneration: ...

    def iter_vectors(self, model: str, after: int = 0) -> Iterator[StoredVector]: ...

    def ranks_vectors(self) -> bool:
        """Q2: whether rank_vectors ranks (PostgreSQL with pgvector), so that a search
        need not load every vector into a matrix."""
        ...

    def rank_vectors(
        self, model: str, question: bytes, want: int, within: VectorFilter | None = None
    ) -> list[RankedVector] | None:
        """Q2: the `want` vectors of the model nearest the question's blob, best first, by
        inner product, kept to `within`, when the store ranks them itself (PostgreSQL with
        pgvector); None when it does not: the caller ranks the matrix (iter_vectors)."""
        ...

    def score_vectors(
        self, model: str, question: bytes, keys: Sequence[tuple[str, int]]
    ) -> dict[tuple[str, int], float]:
        """Q2: the inner product of the question with each of these owners' vectors, where
        rank_vectors ranks (absent: no vector of that size, or a store that does not)."""
        ...

    def vector_models(self) -> dict[str, int]:
        """Q2: model -> how many vectors of it are stored (doctor: which are stale)."""
        ...

    def drop_vectors(self, keep: str) -> int:
        """Q2: remove every vector of a model other than `keep` (after a change of model,
        once `keep` covers everything); returns how many went."""
        ...


class CurationStore(Protocol):
    """The duplicate guard, staleness, and facts brought in whole (X5, doctor)."""

    def similar_facts(
        self, content: str, exclude: int | None, threshold: float, limit: int
    ) -> list[ScoredFact]: ...

    def fact_saying(self, content: str) -> Fact | None: ...

    def exact_duplicate_facts(self) -> list[list[Fact]]: ...

    def sketch_pairs(self) -> list[FactPair]: ...

    def settle_sketches(self, limit: int) -> int:
        """Index the band keys of up to `limit` facts a bulk import left for later (one
        write); how many still wait after (0: none, or a backend that never leaves any)."""
        ...

    def insert_fact_rows(
        self,
        rows: list[Row],
        keep_ids: bool,
        seen: str | None = None,
        held: dict[int, int] | None = None,
    ) -> dict[int, int]: ...

    def defer_hits(self, hits: dict[int, str]) -> None: ...

    def record_hits(self, hits: dict[int, str]) -> None: ...

    def stale_facts(self, before: str) -> list[Fact]: ...


class ArchiveStore(Protocol):
    """Whole-kind reads and writes for export and import (rows.ARCHIVE_FIELDS)."""

    def snapshot(self) -> contextlib.AbstractContextManager[None]:
        """Every read inside it sees one state of the store."""
        ...

    def schema_version(self) -> int: ...

    def latest_schema(self) -> int:
        """The schema version this memdir writes, read without opening anything."""
        ...

    def archive_counts(self) -> dict[str, int]: ...

    def archive_rows(self, kind: str) -> Iterator[Row]: ...

    def existing_keys(self, kind: str, keys: list[str]) -> set[str]: ...

    def fact_identities(self) -> dict[FactIdentity, int]: ...

    def restore_rows(self, rows: dict[str, list[Row]]) -> None: ...


class HealthStore(Protocol):
    """The read-only look (doctor): never creates, migrates or writes anything."""

    read_only: bool

    def exists(self) -> bool:
        """Whether the store has been made (memory.db, a scope's schema): never makes it."""
        ...

    def inspect(self) -> DatabaseHealth:
        """The integrity check, schema and size of a database that exists."""
        ...


class Store(
    FactStore,
    SessionStore,
    CacheStore,
    IndexStore,
    CurationStore,
    ArchiveStore,
    HealthStore,
    Protocol,
):
    def close(self) -> None: ...
