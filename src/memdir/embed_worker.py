"""The MCP server's background embedder (Q2, Q3): a thread with a companion Memory of the
served one (its own connection) that gives a vector to whatever has none. It drives the
facade, so it lives with the front ends; what it runs is search/vectors.py."""

from __future__ import annotations

import atexit
import threading

from . import advice, duplicates
from .errors import MemdirError
from .memory import Memory
from .search.vectors import embed_pending
from .storage import embedders

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from .types import Embedder

RETRY_AFTER = 5.0  # seconds before the worker tries again after the store refused it


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
        self._compare: list[tuple[int, frozenset[int]]] = []  # facts to compare by meaning
        self._found: list[dict[str, Any]] = []  # what they resemble, for the next answer

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

    def compare(self, fact_id: int, named: frozenset[int]) -> None:
        """N1: compare fact `fact_id` with the others by meaning, in the background; what
        it resembles, beyond the facts in `named`, waits for take(). Never blocks."""
        with self._turns:
            self._compare.append((fact_id, named))
        self.poke()

    def take(self) -> list[dict[str, Any]]:
        """The comparisons found since the last take: each a fact written earlier, what it
        resembles by meaning and what to do about it (tool calls: advice for the server)."""
        with self._turns:
            found, self._found = self._found, []
        return found

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
            choice = self.memory.settings.embedding_choice()  # [embeddings]'s model (Q2)
            if not embedders.preload(choice, self._stop.is_set):
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
        # a companion: a connection of its own, the served Memory's model and matrix
        with self.memory.companion() as own:
            while not self._stop.is_set():
                self._wake.clear()
                with self._turns:
                    seen = self._asked
                wait: float | None = None
                try:
                    self._compare_waiting(own)
                    if self._stop.is_set():
                        break
                    own.sync_index()
                    self.embedded += embed_pending(own.store, embedder, stop=self._stop.is_set)
                except MemdirError:
                    wait = RETRY_AFTER  # locked or busy: the next poke or a retry takes it
                else:
                    with self._turns:
                        self._answered = seen
                        self._turns.notify_all()
                self._wake.wait(wait)

    def _compare_waiting(self, own: Memory) -> None:
        """The facts written since the last pass, each compared by meaning (which gives it
        its vector); those the store refused meanwhile wait for the retry."""
        with self._turns:
            waiting, self._compare = self._compare, []
        for at, (fact_id, named) in enumerate(waiting):
            if self._stop.is_set():
                return
            try:
                similar = own.similar_later(fact_id, named)
            except MemdirError:
                with self._turns:
                    self._compare[:0] = waiting[at:]
                raise
            except Exception as exc:  # a bug of ours: this one is dropped, not the thread
                if self.warn is not None:
                    self.warn(f"comparing fact {fact_id} by meaning failed: {exc!r}")
                continue
            if similar:
                hint = advice.running_as("mcp", duplicates.similar_hint, similar, fact_id)
                found = {"fact": fact_id, "similar": [s.to_dict() for s in similar]}
                with self._turns:
                    self._found.append({**found, "hint": hint})
