"""The Memory facade's search (Q1-Q3): one store searched across every tier, the index kept
current, the embedding model loaded when vectors are there to compare, and what a front
end should say about the last search."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable

from .. import advice, facts
from ..errors import EmbeddingError, MemdirError, MissingExtraError, StorageError
from ..lazy import lazy
from ..models import Entry, Hit
from ..records import Record
from .base import MemoryBase, one_view

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .. import entries, search
    from ..search import index, vectors, worker
    from ..search.explain import Why
    from ..types import Category, Embedder, Kind, SearchMode
else:
    entries = lazy("memdir.entries")
    search = lazy("memdir.search")
    index = lazy("memdir.search.index")
    vectors = lazy("memdir.search.vectors")
    worker = lazy("memdir.search.worker")

INSTALL_SHOWN = "search.notice"  # kv: the store was told search is lexical only
_install_shown = False  # ...or, when the store could not record it, this process was
QUERY_BUDGET = 10.0  # seconds a search waits for the warm worker's answer
START_BUDGET = 60.0  # seconds a search in a mode asked for by name waits for it to start


class Reindexed(Record):
    """What `reindex` rebuilt: the entries (broken ones carry their error), the files
    chunked, the items embedded, the vectors of other models dropped (Q2: after a change
    of model)."""

    entries: list[Entry]
    files: int
    embedded: int
    dropped: int = 0


class SearchMemory(MemoryBase):
    """Search, the index and the vectors behind it."""

    @one_view
    def search(
        self,
        query: str,
        *,
        category: Category | None = None,
        limit: int = 10,
        since: str | None = None,
        kinds: str | list[Kind] | tuple[Kind, ...] | None = None,
        mode: SearchMode | None = None,
        min_score: float | None = None,
        as_of: str | None = None,
        record: bool = True,
    ) -> list[Hit]:
        """Q1-Q3: every tier (or `kinds` of them), best first. `mode` lexical, semantic or
        hybrid (default: [search] mode, hybrid when the embeddings extra is installed);
        `min_score` drops semantic candidates below that cosine (default 0.5). `as_of`
        (a date means its end): the facts that held then, superseded ones included; only
        facts keep a history, so only facts are searched, lexically. `record` False: the
        facts found are not noted as used (an evaluation asks, it does not use, Q5)."""
        search.check_query(query)
        wanted_kinds, when = search.check_filters(category, kinds, min_score, as_of)
        settings = self.settings
        embedder = None
        remote = None
        self.too_big = []
        self.worker_starting = False
        self.model_failed = None
        # a mode asked for (by the call or [search] mode) waits for the worker and fails
        # when the model does; the default mode ranks by words and says why (Q2)
        explicit = mode is not None or settings.search_mode != "auto"
        if when is not None:  # the past: facts only, lexical (superseded facts keep no vector)
            run_mode, wanted_kinds = "lexical", ("fact",)
        else:
            run_mode = search.effective_mode(self.search_mode(mode), query)
            # Keeping the index current writes, and a search must not fail because another
            # process holds the write lock: then it answers from the index as it stands.
            with contextlib.suppress(StorageError):
                self.sync_index(
                    wanted_kinds
                )  # only the tiers searched: a fact search stats no file
        self.unembedded, self._searched = 0, run_mode
        if run_mode != "lexical":
            # Q2: a search embeds its question only. What has no vector yet is ranked
            # by its words. The model is loaded when there are vectors to compare the
            # question with, or when a server holds it (or is loading it) anyway.
            model = self.model_id()
            # the worker's status, when it is up, says how many vectors there are and how
            # many items wait: counting them here took ~0.25 s at 100k in every process
            remote, status = self._worker()
            stored = status.get("vectors")
            if not isinstance(stored, int):
                stored = 0
                with contextlib.suppress(StorageError):
                    stored = self.store.vector_generation(model)[0]
            if not stored:
                remote = None  # nothing to compare the question with
            if stored or self.embed_later is not None:
                if remote is None and stored:
                    remote, status = self._remote(explicit)
                if self.worker_starting:  # by words this time, and the answer says so
                    run_mode = "lexical"
                elif remote is None:
                    try:
                        embedder = self.embedder()
                    except EmbeddingError as exc:  # a model that cannot load, an endpoint down
                        if explicit:
                            raise
                        self.model_failed, run_mode = str(exc), "lexical"
            waiting = status.get("waiting")
            if isinstance(waiting, int):
                self.unembedded = waiting  # the worker keeps the count: ~0.2 s at 100k here
            elif not self.worker_starting:
                with contextlib.suppress(StorageError):
                    self.unembedded = self.store.count_unembedded(model)
            if self.unembedded and self.embed_later is not None:
                self.embed_later()  # another process wrote them, or a hand edit

        def ranked(
            run_mode: str, embedder: Embedder | None, remote: worker.Remote | None
        ) -> list[Hit]:
            return search.search(
                self.store,
                self.layout,
                query,
                category=category,
                since=facts.normalize_since(since),
                limit=search.check_limit(limit),
                kinds=wanted_kinds,
                mode=run_mode,
                min_score=settings.search_min_score if min_score is None else float(min_score),
                embedder=embedder,
                cache=self._vectors,
                weights=(settings.search_lexical_weight, settings.search_semantic_weight),
                rrf_k=settings.search_rrf_k,
                pending=self.unembedded,
                as_of=when,
                context_weights=(settings.search_neighbour_weight, settings.search_group_weight),
                remote=remote,
            )

        try:
            hits = ranked(run_mode, embedder, remote)
        except EmbeddingError as exc:  # the question could not be embedded (Q2)
            if explicit or run_mode == "lexical":
                raise
            self.model_failed, self._searched = str(exc), "lexical"
            hits = ranked("lexical", None, None)
        if record:
            self._note_hits(hits)
        return hits

    def _note_hits(self, hits: list[Hit]) -> None:
        """Remember which facts a search found (doctor: facts never recalled), without
        writing the database: the store appends them to its journal of deferred hits (no
        lock, no wait), which the next write folds in (MemoryBase.require_writable,
        flush_hits). A subagent's searches and a disabled memory note nothing:
        bookkeeping never fails a search."""
        if not self.settings.enabled or self.read_only:
            return
        now = self._now()
        found = {hit.id: now for hit in hits if hit.kind == "fact" and hit.id is not None}
        if found:
            self.store.defer_hits(found)

    def flush_hits(self) -> None:
        """Record now the hits that searches noted (the store's journal: this Memory's, its
        companions' and other processes')."""
        self._fold_hits()

    def _worker(self) -> tuple[worker.Remote | None, dict[str, object]]:
        """The store's warm worker and its status when this process uses it and it is up
        (a stat of its socket, then one question); (None, {}) else."""
        if self._embedder is not None or not self.use_worker or self._owner is not None:
            return None, {}
        if self.embed_later is not None or self.settings.search_worker_idle <= 0:
            return None, {}
        places = worker.Places(self.state.path)
        if os.path.exists(places.socket):
            status = worker.call(places, {"op": "status"}, QUERY_BUDGET)
            if status is not None and "error" not in status:
                if status.get("model") != self.model_id():
                    # Q2: it serves the model config.toml named before: it goes, and
                    # one with the configured model starts (never a mix of spaces)
                    worker.retire(places, time.monotonic() + QUERY_BUDGET)
                    return None, {}
                return worker.Remote(places, QUERY_BUDGET, self.model_id()), status
        return None, {}

    def _remote(self, explicit: bool) -> tuple[worker.Remote | None, dict[str, object]]:
        """How this search ranks by meaning (Q2): through the store's warm worker (a
        Remote), in this process (None: a server, a library caller, a given model, or
        [search] worker_idle = 0), or not this time (None and `worker_starting`: the
        worker was not up, so it is started and this search, in the default mode, ranks
        by words rather than wait ~1 s for it). A mode asked for by name waits for it.
        With the worker, its status too (how many items wait for a vector). Called when
        _worker found none up."""
        if self._embedder is not None or not self.use_worker or self._owner is not None:
            return None, {}
        if self.embed_later is not None or self.settings.search_worker_idle <= 0:
            return None, {}
        places = worker.Places(self.state.path)
        remote = worker.Remote(places, QUERY_BUDGET, self.model_id())
        try:
            started = worker.start(places)
        except (OSError, MemdirError):
            return None, {}  # cannot start one here: the model is loaded in this process
        if not explicit:
            self.worker_starting = True
            return None, {}
        status = worker.wait_up(places, time.monotonic() + START_BUDGET, started)
        if status is None or status.get("model") != self.model_id():
            return None, {}  # it failed (its model cannot load here): this process tries
        return remote, status

    def explain(self, question: str, hits: list[Hit], *, as_of: bool = False) -> list[Why]:
        """V3: for each hit of the last search of `question`, the question's words found
        in it and how it was ranked (search/explain.py: read from the answer, after it)."""
        from ..search.explain import why

        mode = self._searched
        return [why(question, mode, h.content, h.lexical_only, as_of) for h in hits]

    @property
    def searched_mode(self) -> str:
        """The mode the last search ran in (lexical when it fell back from another)."""
        return self._searched

    def search_mode(self, mode: SearchMode | None = None) -> str:
        """The mode a search runs in: `mode`, else [search] mode; "auto" is hybrid when the
        embeddings extra is installed. Semantic without the extra is a clear error."""
        wanted = mode if mode is not None else self.settings.search_mode
        if wanted == "auto":
            return "hybrid" if self._model_installed() else "lexical"
        run = search.check_mode(wanted)
        if run != "lexical" and not self._model_installed():
            raise MissingExtraError(self._install_hint(), extra=self._extra())
        return run

    def embedder(self) -> Embedder:
        """The embedding model ([embeddings], the bundled MiniLM by default), loaded on
        first use and shared with companions (Q2)."""
        if self._owner is not None:  # a companion shares its owner's model (one in memory)
            owner = self._owner  # a Memory, so a SearchMemory: its own part
            assert isinstance(owner, SearchMemory)
            return owner.embedder()
        if self._embedder is None:
            self._embedder = self._load_embedder()
        return self._embedder

    def search_notice(self) -> str | None:
        """What a front end should say about the last search: the files too big to index
        (Q3: never silently unsearchable), then the embedding note below."""
        notes = []
        if self.too_big:
            from ..search.index import MAX_INDEX_BYTES

            shown = ", ".join(self.too_big[:5]) + (" ..." if len(self.too_big) > 5 else "")
            notes.append(
                f"{len(self.too_big):,} file(s) over {MAX_INDEX_BYTES // 2**20} MB are too big "
                f"to index and were not searched: {shown}; split them into smaller files"
            )
        embedding = self._embedding_notice()
        if embedding:
            notes.append(embedding)
        return "; ".join(notes) or None

    def _embedding_notice(self) -> str | None:
        """Q2: what a front end should say about the last search, if anything:
        how many items it ranked by their words alone for want of a vector, and how they
        get one; or, once per store, that search is lexical only without the embeddings
        extra, with the command that installs it from where memdir was installed."""
        if self.worker_starting:
            return (
                "ranked by words alone: the embedding worker is starting (semantic ranking "
                "from the next search on)"
            )
        if self.model_failed:
            return f"ranked by words alone: the embedding model is unavailable: {self.model_failed}"
        if self.unembedded:
            n = self.unembedded
            them, they = ("them", "they were") if n != 1 else ("it", "it was")
            items = f"{n:,} item{'s are' if n != 1 else ' is'} not embedded yet"
            if self._searched == "semantic":
                seen = f"semantic search cannot see {them}, so {they} matched by words"
            else:
                seen = f"{they} ranked by words alone"
            if self.embed_later is not None:
                how = f"the server is embedding {them} in the background"
            elif self._worker_up() is not None:
                how = f"the embedding worker is embedding {them} in the background"
            else:
                how = f"to embed {them}: {advice.reindex()}"
            return f"{items}: {seen}; {how}"
        if self._model_installed() or not self.settings.enabled:
            return None
        global _install_shown
        if _install_shown:
            return None
        try:
            if self.store.get_value(INSTALL_SHOWN) is not None:
                return None
            self.store.set_value(INSTALL_SHOWN, "shown")
        except StorageError:
            _install_shown = True  # the store cannot remember it: this process does
        return f"search is lexical only: {self._install_hint()}"

    @one_view
    def reindex(self, progress: Callable[[str, int, int], None] | None = None) -> Reindexed:
        """G3, Q3: rebuild MEMORY.md, the entry cache and the search index from the files,
        and embed everything not embedded yet (when the extra is installed): after a
        change of [embeddings] model that is everything, and the old model's vectors are
        dropped once the new one covers the store (Q2). `progress` is told (stage, done,
        total) as it goes."""
        self._enabled("rebuild the index")
        found = entries.reindex(self.layout, self.store)
        step = None if progress is None else (lambda d, t: progress("chunks", d, t))
        self.docs.refresh()
        files = index.sync(self.layout, self.store, full=True, progress=step)
        embed = None if progress is None else (lambda d, t: progress("embeddings", d, t))
        embedded = self.embed_pending(embed)
        dropped = 0
        if self._embedder is not None:  # it embedded: the store is of this model now
            dropped = vectors.replace_model(self.store, self._embedder)
        return Reindexed(found, files, embedded, dropped)

    def embed_pending(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Q2: give a vector to every fact and file section that has none yet (what
        `memdir reindex` and `memdir import` end with); `progress` is told (done, total)
        from the first item on. 0 when search here does not use vectors ([search] mode
        lexical, or no embeddings extra). Returns how many items were embedded."""
        if not self._wants_vectors():
            return 0
        self._enabled("embed memory")
        self.sync_index()
        embedder = self._embedder or self._load_embedder()
        self._embedder = embedder
        return vectors.embed_pending(self.store, embedder, progress)

    @one_view
    def sync_index(self, kinds: tuple[str, ...] | None = None) -> None:
        """Bring the chunk index up to date with the files (cheap when nothing changed),
        or only its files of `kinds`. The files too big to index are remembered for the
        search's note (Q3)."""
        if self.settings.enabled:
            self.docs.refresh()  # team mode: the files indexed are the stored tiers' view
            self.too_big = []
            if kinds is None:
                index.sync(self.layout, self.store, too_big=self.too_big)
            else:
                index.sync(self.layout, self.store, too_big=self.too_big, kinds=kinds)
