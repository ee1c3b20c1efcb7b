"""The narrow interface concept modules use for indexed data. It imports no backend, so a
PostgreSQL store can be added beside sqlite.py without touching facts.py or sessions.py.

Queries reach a store already validated: `match` is an FTS5 expression built by query.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from ..models import Fact, Provenance, Session, Task

# (mtime_ns, size, description, updated, error, the whole Entry as JSON, the key of the
# normalised body, its LSH band keys space-separated): similarity.py
CachedEntry = tuple[int, int, str, str | None, str | None, str, int | None, str]


# (kind, mtime_ns, size, content hash) of a file the search index holds
FileState = tuple[str, int, int, str]
# (id, path, kind, start_line, end_line, date, content) of one chunk of a markdown file
ChunkRow = tuple[int, str, str, int, int, str | None, str]
# (start_line, end_line, date, content, hash) of a chunk about to be stored
NewChunk = tuple[int, int, str | None, str, str]


class Store(Protocol):
    def add_fact(
        self, category: str, content: str, now: str, by: Provenance, valid_from: str | None = None
    ) -> Fact:
        """A new active fact, or the active fact that says the same, marked `duplicate`."""
        ...

    def add_facts(self, rows: list[tuple[str, str]], now: str, by: Provenance) -> list[int]: ...

    def supersede_fact(
        self,
        old_id: int,
        category: str | None,
        content: str,
        now: str,
        by: Provenance,
        valid_from: str | None = None,
    ) -> tuple[Fact, Fact]:
        """(the old fact, now superseded; the new active one), in one transaction."""
        ...

    def remove_fact(self, fact_id: int, now: str) -> Fact: ...

    def get_fact(self, fact_id: int) -> Fact | None: ...

    def fact_chain(self, fact_id: int) -> list[Fact]:
        """Every version linked to fact_id by supersede, oldest first."""
        ...

    def search_facts(
        self,
        match: str,
        category: str | None,
        since: str | None,
        limit: int,
        as_of: str | None = None,
    ) -> list[tuple[Fact, float]]:
        """Active facts matching the FTS5 expression, best first, with a score (higher = better);
        with `as_of`, the facts that held at that time, superseded ones included."""
        ...

    def similar_facts(
        self, content: str, exclude: int | None, threshold: float, limit: int
    ) -> list[tuple[Fact, float]]: ...

    def fact_saying(self, content: str) -> Fact | None: ...

    def exact_duplicate_facts(self) -> list[list[Fact]]: ...

    def sketch_pairs(self) -> list[tuple[Fact, Fact]]: ...

    def insert_fact_rows(
        self,
        rows: list[dict[str, object]],
        keep_ids: bool,
        seen: str | None = None,
        held: dict[int, int] | None = None,
    ) -> dict[int, int]: ...

    def record_hits(self, hits: dict[int, str]) -> None: ...

    def stale_facts(self, before: str) -> list[Fact]: ...

    def count_facts(self) -> dict[str, int]: ...

    def start_session(
        self, session_id: str, surface: str, parent_id: str | None, now: str
    ) -> Session: ...

    def get_session(self, session_id: str) -> Session | None: ...

    def end_session(self, session_id: str, now: str) -> Session: ...

    def list_sessions(self, limit: int) -> list[Session]: ...

    def count_write(self, session_id: str, kind: str) -> None: ...

    def start_task(self, task_id: str, parent_id: str | None, now: str) -> Task: ...

    def end_task(self, task_id: str, state: str, now: str) -> Task: ...

    def get_task(self, task_id: str) -> Task | None: ...

    def all_tasks(self) -> list[Task]: ...

    def entry_cache(self, with_meta: bool = True) -> dict[str, CachedEntry]:
        """name -> what a global entry file said when last read, keyed by (mtime, size)."""
        ...

    def update_entry_cache(self, changed: dict[str, CachedEntry], gone: list[str]) -> None: ...

    def procedure_prints(self) -> dict[str, tuple[int, int, int | None, str]]: ...

    def update_procedure_prints(
        self, changed: dict[str, tuple[int, int, int | None, str]], gone: list[str]
    ) -> None: ...

    def get_value(self, key: str) -> str | None: ...

    def set_value(self, key: str, value: str) -> None: ...

    def size_of_facts(self) -> dict[str, tuple[int, int]]:
        """status -> (count, characters of content)."""
        ...

    # the search index (storage/sqlite_index.py)
    def indexed_files(self) -> dict[str, FileState]: ...

    def replace_chunks(
        self, changes: list[tuple[str, FileState, list[NewChunk] | None]], gone: list[str]
    ) -> None: ...

    def search_chunks(
        self, match: str, kinds: tuple[str, ...], since: str | None, limit: int
    ) -> list[tuple[ChunkRow, float]]: ...

    def chunks_by_id(self, ids: list[int]) -> dict[int, ChunkRow]: ...

    def facts_by_id(self, ids: list[int]) -> dict[int, Fact]: ...

    def unembedded(self, model: str, limit: int) -> list[tuple[str, int, str, str]]: ...

    def unembedded_items(
        self, model: str, fact_ids: list[int], paths: list[str]
    ) -> list[tuple[str, int, str, str]]:
        """As unembedded, for these facts and the chunks of these files only."""
        ...

    def count_unembedded(self, model: str) -> int: ...

    def vectors_by_hash(self, model: str, hashes: list[str]) -> dict[str, bytes]: ...

    def put_vectors(self, model: str, rows: list[tuple[str, int, str, bytes]]) -> None: ...

    def vector_generation(self, model: str) -> tuple[int, int]: ...

    def iter_vectors(self, model: str) -> Iterator[tuple[str, int, bytes]]: ...

    def close(self) -> None: ...
