"""The warm worker of a store (Q2): one process that holds the embedding model and the
vector matrix and answers over a Unix socket (search/worker.py says where and how), so
that every memdir process of the store searches by meaning without loading either.

Started on demand, detached, by whichever memdir process first wants vectors
(`python -m memdir.vector_worker <state dir>`). Never two for one store: it holds an
exclusive flock on <state>/worker/lock for its lifetime, a second one started at the same
moment exits at once, and only the lock holder (re)binds the socket. It exits when no
request came for [search] worker_idle seconds and nothing waits to be embedded, when
its store goes away, or on SIGTERM/SIGINT, and removes its socket then; it belongs to no
caller's session, so a crash of whoever started it leaves it to its idle exit.

Requests (one a connection, framed JSON): `status` (pid, model, RSS, vectors held, idle
time, items waiting); `query` (a question's nearest vectors and the cosines of given
keys); `embed` (these facts and files' chunks, now: a CLI write); `poke` (embed what
waits, in the background). Between requests it embeds what has no vector, a step at a
time, so a search is never kept waiting longer than one step.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import signal
import socket
import sys
import time

from .errors import MemdirError
from .memory import Memory
from .search import VectorCache, nearest_vectors
from .search.vectors import embed_items, embed_pending
from .search.worker import Places, folder_id, receive, send

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .types import Embedder

CHECK_EVERY = 1.0  # seconds between looks at the idle clock and at the store
RETRY_AFTER = 5.0  # seconds before embedding is tried again after the store refused it


def _mtime(path: str) -> int | None:
    """When config.toml last changed (None: there is none): a change of model shows here."""
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def rss_mib() -> float:
    """This process's resident memory, MiB (Linux /proc; 0 elsewhere)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return 0.0


class Worker:
    def __init__(self, memory: Memory, embedder: Embedder, idle: float) -> None:
        self.memory, self.embedder, self.idle = memory, embedder, idle
        self.cache = VectorCache()
        self.last = time.monotonic()
        self.wants_embedding = True  # at start: whatever waits
        self.retry_at = 0.0
        self.embedded = 0
        self.exiting = False  # asked to exit (the store's model changed): after this reply
        self._config = os.path.join(memory.state.path, "config.toml")
        self._config_seen = _mtime(self._config)

    def model_changed(self) -> bool:
        """Q2: whether config.toml now names another model than the one this worker
        serves (it then exits, and the next caller starts one with the new model). A
        stat a second; the file is read again only when it changed."""
        seen = _mtime(self._config)
        if seen == self._config_seen:
            return False
        self._config_seen = seen
        from .settings import load_settings

        try:
            wanted = load_settings(self._config).embedding_choice()
        except MemdirError:
            return False  # a broken file: keep serving; the callers report it
        from .storage import embedders

        return embedders.model_id(wanted) != self.embedder.name

    def _other_model(self, request: dict[str, Any]) -> dict[str, Any] | None:
        model = request.get("model")
        if model is not None and model != self.embedder.name:
            return {"error": f"this worker serves {self.embedder.name}, not {model}"}
        return None

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        store = self.memory.store
        if op == "status":
            if store.ranks_vectors():  # the server ranks them (pgvector): no matrix here
                count = store.vector_generation(self.embedder.name).n
            else:
                count = len(self.cache.load(store, self.embedder)[1])  # current: its count
            return {
                "pid": os.getpid(),
                "model": self.embedder.name,
                "rss_mib": rss_mib(),
                "vectors": count,
                "idle_s": round(time.monotonic() - self.last, 3),
                "idle_exit_s": self.idle,
                "embedded": self.embedded,
                "waiting": store.count_unembedded(self.embedder.name),
            }
        if op in ("query", "embed") and (other := self._other_model(request)) is not None:
            return other
        if op == "exit":
            self.exiting = True
            return {"ok": True}
        if op == "query":
            want = int(request["want"])
            keys = [(str(o), i) for o, i in request.get("keys", [])]
            nearest, similarity = nearest_vectors(
                self.cache, store, self.embedder, str(request["text"]), want, keys
            )
            if store.count_unembedded(self.embedder.name):
                self.wants_embedding = True  # another process wrote them, or a hand edit
            return {
                "top": [[o, i, score] for (o, i), score in nearest],
                "cosines": [similarity(key) for key in keys],
            }
        if op == "embed":
            facts = [int(i) for i in request.get("facts", [])]
            paths = [str(p) for p in request.get("paths", [])]
            return {"embedded": embed_items(store, self.embedder, facts, paths)}
        if op == "poke":
            self.wants_embedding = True
            return {"ok": True}
        return {"error": f"unknown request {op!r}"}

    def embed_waiting(self, stop: Any) -> None:
        """Embed what has no vector until nothing waits or a request arrives."""
        if not self.wants_embedding or time.monotonic() < self.retry_at:
            return
        try:
            self.memory.sync_index()
            self.embedded += embed_pending(self.memory.store, self.embedder, stop=stop)
        except MemdirError as exc:
            print(f"embedding paused: {exc}", file=sys.stderr, flush=True)
            self.retry_at = time.monotonic() + RETRY_AFTER
            return
        if not stop():
            self.wants_embedding = False


def serve(places: Places, memory: Memory, worker: Worker, listener: socket.socket) -> None:
    def pending() -> bool:
        return bool(select.select([listener], [], [], 0)[0])

    next_check = time.monotonic() + CHECK_EVERY
    home = folder_id(memory.state.path)
    while True:
        busy = worker.wants_embedding and time.monotonic() >= worker.retry_at
        ready, _, _ = select.select([listener], [], [], 0 if busy else CHECK_EVERY)
        if ready:
            conn, _ = listener.accept()
            with conn:
                conn.settimeout(10)
                try:
                    request = receive(conn)
                    try:
                        reply = worker.answer(request)
                    except (MemdirError, KeyError, TypeError, ValueError) as exc:
                        reply = {"error": str(exc)}
                    send(conn, reply)
                except (OSError, ValueError):
                    pass  # the caller left or sent nonsense: it is its loss, not ours
            worker.last = time.monotonic()
            if worker.exiting:
                print("asked to exit: the store's model changed", file=sys.stderr, flush=True)
                return
            continue
        worker.embed_waiting(pending)
        now = time.monotonic()
        if now >= next_check:
            next_check = now + CHECK_EVERY
            if home is None or folder_id(memory.state.path) != home:
                print("the store is gone: exiting", file=sys.stderr, flush=True)
                return
            if now - worker.last >= worker.idle and not worker.wants_embedding:
                return
            if worker.model_changed():
                print("config.toml names another model: exiting", file=sys.stderr, flush=True)
                return


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m memdir.vector_worker STATE_DIR", file=sys.stderr)
        return 2
    places = Places(argv[0])
    try:  # made by its starter: none, and the store is gone (nothing is made in its place)
        places.make_dirs(in_store=False)
        lock = os.open(places.lock, os.O_RDWR | os.O_CREAT, 0o600)
    except (MemdirError, OSError) as exc:
        print(f"no store to serve at {places.state_dir}: {exc}", file=sys.stderr, flush=True)
        return 1
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return 0  # the store has its worker already
    os.chdir("/")  # never keep its starter's folder busy (a mount, a folder to delete)
    # SIGTERM ends it as SIGINT does: through the finally below, which removes the socket
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    listener = None
    try:
        memory = Memory(places.state_dir)
        idle = memory.settings.search_worker_idle
        embedder = memory.embedder()  # the model [embeddings] names (Q2)
        worker = Worker(memory, embedder, idle)
        if not memory.store.ranks_vectors():
            worker.cache.load(memory.store, embedder)  # ready to answer from the first request
        with contextlib.suppress(FileNotFoundError):
            os.unlink(places.socket)  # a dead worker's, or one killed: ours now, by the lock
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            listener.bind(places.socket)
        finally:
            os.umask(old)
        os.chmod(places.socket, 0o600)
        listener.listen(64)
        os.ftruncate(lock, 0)
        os.write(lock, f"{os.getpid()}\n".encode())
        print(f"pid {os.getpid()} serving {places.state_dir}", file=sys.stderr, flush=True)
        serve(places, memory, worker, listener)
    except KeyboardInterrupt:
        pass
    except MemdirError as exc:  # the model cannot load (a missing extra, an endpoint down)
        print(f"cannot serve: {exc}", file=sys.stderr, flush=True)
        return 1  # the caller waiting for it learns at once (worker.wait_up)
    finally:
        if listener is not None:
            listener.close()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(places.socket)
        os.close(lock)  # releases the lock: a new worker may start now
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
