"""The duplicate guard's worker (N1): indexes, in the background, the band keys of the
facts a bulk import left for later (storage/sqlite/curation.py, SKETCH_LATER), so that
an import runs at the speed of its insert and the next write does not pay for it.

Started, detached, by the import (`python -m memdir.guard_worker <state dir> <memory dir>`:
the starter's store, whatever this process's environment says). Never two
for one store: it holds an exclusive flock on <state>/worker/guard.lock, and a second one
exits at once. It waits for a quiet moment (no commit for QUIET seconds, or PATIENCE at
most, so a store that is written all the time is still indexed), indexes PART facts in one
write, and goes on part after part (waiting again only after another process's commit)
until nothing waits; then it exits. A write that needs the keys before
it is done indexes what is left itself, under the same write lock, so nothing is indexed
twice and nothing is missed. It exits as well when its store goes away.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import time

from .errors import MemdirError
from .memory import Memory
from .paths import ALLOW_ROOT_ENV
from .search.worker import Places, folder_id

QUIET = 0.5  # seconds without a commit before a part is indexed
PATIENCE = 10.0  # seconds it waits for a quiet moment at most
PART = 4096  # facts indexed in one write (~50 ms with numpy, ~0.3 s without)
LOOK_EVERY = 0.1
GIVE_UP_AFTER = 30  # writes refused in a row (a lock held for minutes, a broken store)


def _stamp(db: str) -> tuple[int, int, int, int]:
    """What changes when another process commits: memory.db and its WAL, size and mtime."""
    return (*_size_and_time(db), *_size_and_time(db + "-wal"))


def _size_and_time(path: str) -> tuple[int, int]:
    try:
        info = os.stat(path)
    except OSError:
        return -1, -1
    return info.st_size, info.st_mtime_ns


def _quiet(db: str, seen: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
    """Wait until `db` saw no commit for QUIET seconds (PATIENCE at most); its stamp then."""
    started = still = time.monotonic()
    while True:
        time.sleep(LOOK_EVERY)
        now, stamp = time.monotonic(), _stamp(db)
        if stamp != seen:
            seen, still = stamp, now
        if now - still >= QUIET or now - started >= PATIENCE:
            return seen


class Settled:
    """What one worker did: the facts whose keys it indexed, and how many still wait when
    it stopped (0: done; -1: its store went away)."""

    def __init__(self) -> None:
        self.indexed = 0
        self.left = 0


def settle(memory: Memory, done: Settled) -> None:
    """Index what waits, a part at a time between other processes' writes."""
    db, refused = memory.layout.db, 0
    seen, ours = _stamp(db), None
    home = folder_id(memory.state.path)

    def here() -> bool:
        return home is not None and folder_id(memory.state.path) == home

    while here():
        if seen != ours:  # another process committed since its last part: let it finish
            seen = _quiet(db, seen)
            if not here():  # gone while it waited: nothing goes into a removed store
                break
        try:
            waiting = memory.settle_imported(0)
            done.left = memory.settle_imported(PART)
        except MemdirError as exc:  # locked for longer than the busy timeout: later
            refused += 1
            if refused >= GIVE_UP_AFTER:
                print(f"giving up: {exc}", file=sys.stderr, flush=True)
                done.left = memory.store.settle_sketches(0)
                return
            continue
        refused = 0
        done.indexed += max(0, waiting - done.left)  # (another import may add meanwhile)
        seen = ours = _stamp(db)  # its own commit is not another process's
        if done.left == 0:
            return
    done.left = -1


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m memdir.guard_worker STATE_DIR MEMORY_DIR", file=sys.stderr)
        return 2
    places, done = Places(argv[0]), Settled()
    os.chdir("/")  # never keep its starter's folder busy (a mount, a folder to delete)
    try:  # the starter made the folder: none, and the store is gone
        lock = os.open(places.guard_lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        print(f"no store to index at {places.state_dir}: {exc.strerror}", file=sys.stderr)
        return 1
    try:
        # the starter's root, as it was allowed (a root named by MEMDIR_ALLOW_ROOT)
        env = {"MEMDIR_MEMORY_DIR": argv[1]}
        if ALLOW_ROOT_ENV in os.environ:
            env[ALLOW_ROOT_ENV] = os.environ[ALLOW_ROOT_ENV]
        store = Memory(places.state_dir, env=env, cwd="/")
        with contextlib.closing(store) as memory:
            # memory.db opened now, while the store is there: opened first after the store
            # was removed (a bench's temp folder), it was made again there, and left
            memory.settle_imported(0)
            # An import that saw the lock held as this let go started no worker: so after
            # letting go, one more look, and the lock again if anything waits.
            while _take(lock):
                settle(memory, done)
                fcntl.flock(lock, fcntl.LOCK_UN)
                if done.left != 0 or memory.settle_imported(0) == 0:
                    return 1 if done.left > 0 else 0
    except KeyboardInterrupt:
        pass
    except MemdirError as exc:
        print(f"cannot index the imported facts' keys: {exc}", file=sys.stderr, flush=True)
        return 1
    finally:
        os.close(lock)
        # its log's one line (stdout: <state>/worker/log when the import started it)
        print(f"indexed the band keys of {done.indexed} facts", flush=True)
    return 0


def _take(lock: int) -> bool:
    """The lock, or False when another worker of the store holds it (that one does it)."""
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
