"""Keeping vectors current (Q2, Q3, issue 11): when items get their embeddings, and by whom.

A search never embeds anything but its question: what has no vector yet is ranked by its
words (search.py), and the answer says how many items wait. Before, each search embedded
up to 256 waiting items inline: after an import of 2,000 facts the next searches took 20,
8 and 4 s and each ranked differently. Vectors are made instead:

- on a small write, for the written items only (~4 ms an item once the model is loaded;
  a CLI call loads it for that, ~0.35 s, unless [search] embed_on_write = "loaded");
- in bulk by `memdir import` and `memdir reindex`, with progress from the first item (an
  import's writes are made inside `Memory.bulk()`, which defers their vectors to it);
- in the MCP server's background (EmbedWorker): after start, after each write, and after
  a search that met items without a vector (another process wrote them, or a hand edit).

Unchanged text reuses the vector it had (by text hash), whoever embeds it.
"""

from __future__ import annotations

import atexit
import threading

from .errors import MemdirError
from .storage import embeddings
from .storage.rows_cold import NewVector

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from .memory import Memory
    from .storage.base import Store
    from .storage.embeddings import Embedder
    from .storage.rows_cold import Unembedded

    Progress = Callable[[int, int], None]

PAGE = 1024  # rows read per query of what waits: each scans past the embedded ones
STEP = 32  # texts embedded, stored and reported at a time (one batch of the model)
RETRY_AFTER = 5.0  # seconds before the worker tries again after the store refused it


def embed_rows(store: Store, embedder: Embedder, rows: list[Unembedded]) -> int:
    """Store a vector for each (owner, id, text, hash) row: a text embedded before (same
    hash) reuses its vector, the rest are embedded. Returns how many rows were given."""
    if not rows:
        return 0
    known = store.vectors_by_hash(embedder.name, [h for _, _, _, h in rows])
    todo = [row for row in rows if row[3] not in known]
    fresh = embedder.embed([text for _, _, text, _ in todo]) if todo else None
    out = [NewVector(o, i, h, known[h]) for o, i, _, h in rows if h in known]
    if fresh is not None:
        out += [
            NewVector(o, i, h, embeddings.to_blob(v))
            for (o, i, _, h), v in zip(todo, fresh, strict=True)
        ]
    store.put_vectors(embedder.name, out)
    return len(rows)


def embed_pending(
    store: Store,
    embedder: Embedder,
    progress: Progress | None = None,
    stop: Callable[[], bool] | None = None,
) -> int:
    """Embed every fact and chunk that has no vector, STEP at a time: `progress(done,
    total)` is told before the first and after each step; `stop()` is asked before each.
    Returns how many were embedded. Items written meanwhile are taken too."""
    total = store.count_unembedded(embedder.name)
    done = 0
    if progress is not None:
        progress(0, total)
    seen: set[tuple[str, int]] = set()
    while total:
        page = store.unembedded(embedder.name, PAGE)
        page = [row for row in page if (row[0], row[1]) not in seen]
        if not page:
            break  # nothing waits, or only rows that could not be stored: never spin
        for start in range(0, len(page), STEP):
            if stop is not None and stop():
                return done
            rows = page[start : start + STEP]
            embed_rows(store, embedder, rows)
            seen.update((o, i) for o, i, _, _ in rows)
            done += len(rows)
            total = max(total, done)
            if progress is not None:
                progress(done, total)
    return done


def embed_items(store: Store, embedder: Embedder, fact_ids: list[int], paths: list[str]) -> int:
    """Embed these facts and the chunks of these files, if they have no vector yet."""
    return embed_rows(store, embedder, store.unembedded_items(embedder.name, fact_ids, paths))


class EmbedWorker:
    """The MCP server's background embedder: one thread that loads the model, then embeds
    whatever has no vector, and sleeps until poked (after a write, or a search that met
    waiting items). A tool call never waits for it; it has its own connection.

    stop() ends it at the next boundary — between the model's imports, between batches of
    32 — and joins it: an interpreter that finalises while a thread is inside onnxruntime
    aborts the process (exit 134, "terminate called without an active exception")."""

    def __init__(
        self, memory: Memory, embed: bool = True, warn: Callable[[str], None] | None = None
    ) -> None:
        """`embed` False: only load the model (a read-only session writes nothing)."""
        self.memory, self.embed, self.warn = memory, embed, warn
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memdir-embedder", daemon=True)
        self._turns = threading.Condition()
        self._asked = 0  # pokes so far (start is the first)
        self._answered = 0  # pokes seen by the last pass that ran out of work
        self.embedded = 0

    def start(self) -> None:
        # A safety net for a caller that never calls stop(): atexit callbacks run before
        # the interpreter finalises, so the thread is joined on every normal exit.
        atexit.register(self.stop)
        self.poke()
        self._thread.start()

    def poke(self) -> None:
        """Something may need vectors: look again. Never blocks."""
        with self._turns:
            self._asked += 1
        self._wake.set()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until what was asked before this call is embedded (a flush, and what tests
        wait for); False on timeout, or when the worker has ended without it."""
        with self._turns:
            target = self._asked
            return (
                self._turns.wait_for(
                    lambda: self._answered >= target or not self._thread.is_alive(), timeout
                )
                and self._answered >= target
            )

    def stop(self, timeout: float | None = None) -> bool:
        """Stop at the next boundary and wait for the thread; False if it is still running
        after `timeout` seconds."""
        self._stop.set()
        self._wake.set()
        if self._thread.ident is not None:
            self._thread.join(timeout)
        if self._thread.is_alive():
            return False
        atexit.unregister(self.stop)
        return True

    def _run(self) -> None:
        try:
            self._work()
        finally:
            with self._turns:
                self._turns.notify_all()  # a wait_idle learns that the worker has ended

    def _work(self) -> None:
        try:
            if not embeddings.preload(self._stop.is_set):
                return
            embedder = self.memory.embedder()  # the served Memory's model, loaded once
            if not self.embed:
                return
            self._loop(embedder)
        except Exception as exc:  # a thread of its own: what stops it is reported, not raised
            if self.warn is not None:
                why = str(exc) if isinstance(exc, MemdirError) else f"{type(exc).__name__}: {exc}"
                self.warn(f"background embedding stopped: {why}")

    def _loop(self, embedder: Embedder) -> None:
        from .memory import Memory

        with Memory(self.memory.state.path, embedder=embedder) as own:
            while not self._stop.is_set():
                self._wake.clear()
                with self._turns:
                    seen = self._asked
                wait: float | None = None
                try:
                    own.sync_index()
                    self.embedded += embed_pending(own.store, embedder, stop=self._stop.is_set)
                except MemdirError:
                    wait = RETRY_AFTER  # locked or busy: the next poke or a retry takes it
                else:
                    with self._turns:
                        self._answered = seen
                        self._turns.notify_all()
                self._wake.wait(wait)
