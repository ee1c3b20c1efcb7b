"""The connection every part of SQLiteStore shares: WAL, a busy timeout, the read-only
look, and the one way to write.

Every write is one `BEGIN IMMEDIATE` transaction: taking the write lock up front means a
writer waits (up to the busy timeout) instead of failing with "database is locked" when a
read transaction would have to be upgraded.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator

from ...errors import QueryError, StorageError
from ...lazy import lazy
from . import groups
from .bounded import BUDGET
from .migrations import migrate

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
else:
    sqlite3 = lazy("sqlite3")  # imported when the database is first opened (~2 ms)


class Connection:
    """One memory.db, opened on first use; the base of every part of SQLiteStore."""

    search_budget = BUDGET  # how much a question's bounded ranking reads (bounded.py)

    def __init__(
        self,
        path: str,
        *,
        busy_timeout_ms: int = 10_000,
        create: bool = True,
        read_only: bool = False,
        leave_wal: bool = False,
    ) -> None:
        """`read_only`: for looking only (doctor): never creates, migrates or writes the
        file; `PRAGMA query_only` makes even a cache refresh deep in the library fail inside
        SQLite, and the library treats a cache it cannot write as a cache. `leave_wal` (with
        it): not even the checkpoint the last connection's close makes, which folds the WAL
        into memory.db and deletes it (mode=ro): the fork server's look at a store between
        calls (a forked call leaves the WAL for the next one, C1)."""
        self.path = path
        self.leave_wal = leave_wal and read_only
        self.busy_timeout_ms = busy_timeout_ms
        self.create = create and not read_only
        self.read_only = read_only
        self._db: sqlite3.Connection | None = None
        self._why_read_only = "a look only"
        self._look_failed: StorageError | None = None
        # answers that hold until the database changes: (what, model) -> (change token, answer)
        self._memo: dict[tuple[str, str], tuple[tuple[int, int], tuple[int, int] | None]] = {}

    def _conn(self) -> sqlite3.Connection | None:
        """The open connection; None when the database does not exist and may not be made."""
        if self._db is not None:
            return self._db
        from .. import files

        files.confined(os.path.dirname(self.path), self.path)  # X1: memory.db is no link out
        exists = os.path.exists(self.path)
        if not exists and not self.create:
            return None
        if exists and not os.access(os.path.dirname(self.path), os.W_OK):
            # Z: reads never need write access. On a read-only mount (or a folder
            # this user cannot write) WAL cannot make its -shm file, so the store opens
            # read-only and every write reports it; searches answer from the index as is.
            self.read_only, self.create = True, False
            self._why_read_only = "the memory folder is read-only"
            with self._translated("open"):
                self._db = self._open_read_only()
            return self._db
        if self.leave_wal:
            if self._look_failed is not None:
                raise self._look_failed  # once: another try could make the files again
            try:
                with self._translated("open"):
                    self._db = self._open_look()
            except StorageError as exc:
                self._look_failed = exc
                raise
            return self._db
        with self._translated("open"):
            if not exists:
                os.makedirs(os.path.dirname(self.path), exist_ok=True)
            db = sqlite3.connect(
                self.path,
                timeout=self.busy_timeout_ms / 1000,
                isolation_level=None,
                check_same_thread=False,
            )
            try:
                db.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
                if self.read_only:
                    db.execute("PRAGMA query_only = ON")
                    self._db = db
                    return db
                self._enable_wal(db)
                # FULL: an acknowledged write survives power loss, not only a crash.
                db.execute("PRAGMA synchronous = FULL")
                db.execute("PRAGMA foreign_keys = ON")
                migrate(db)
            except BaseException:
                db.close()
                raise
        self._db = db
        return db

    def _open_look(self) -> sqlite3.Connection:
        """The fork server's look between calls (leave_wal): only at a database whose WAL
        is there (a forked call leaves it), since SQLite opens -wal and -shm by name at
        the first read and makes them when they are missing, even read-only. The files are
        checked between the open of memory.db and that read, microseconds apart, so that a
        store deleted right after a call (a test's temporary folder) is not given files
        while it goes; and a look that finds memory.db gone after its read removes the
        empty ones it made meanwhile, and reads nothing."""
        from urllib.parse import quote

        uri = f"file:{quote(os.path.abspath(self.path))}?mode=ro"
        db = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        try:
            db.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
            before = _identities(self.path)
            if None in before:
                raise StorageError(f"{self.path} has no WAL to look at: a look would make one")
            _first_read(db)
            db.execute("PRAGMA query_only = ON")
            after = _identities(self.path)
        except BaseException:
            db.close()
            raise
        if after[0] == before[0]:
            return db  # (a -wal made again after the last close folded it is the db's own)
        db.close()
        if after[0] is None:  # gone, not replaced: what is beside it serves no database
            _remove_left_files(self.path)
        raise StorageError(f"{self.path} went away while it was looked at: nothing was read")

    def _open_read_only(self) -> sqlite3.Connection:
        """mode=ro reads a WAL database while its -shm file exists (another process has it
        open); without one, on read-only media, only `immutable` opens it."""
        from urllib.parse import quote

        uri = f"file:{quote(os.path.abspath(self.path))}?mode=ro"
        for suffix in ("", "&immutable=1"):
            db = sqlite3.connect(
                uri + suffix,
                uri=True,
                timeout=self.busy_timeout_ms / 1000,
                isolation_level=None,
                check_same_thread=False,
            )
            try:
                db.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
                _first_read(db)
                db.execute("PRAGMA query_only = ON")
                return db
            except sqlite3.OperationalError:
                db.close()
                if suffix:
                    raise
        raise AssertionError("unreachable")

    def _enable_wal(self, db: sqlite3.Connection) -> None:
        """Changing the journal mode commits any open transaction (sqlite-utils enable_wal):
        do it first thing, outside any transaction. WAL is persistent, so only the first
        opener of a new file pays for it. When several processes open a new file at once,
        the switch (it needs an exclusive lock) fails with SQLITE_BUSY at once, without the
        busy handler, for all but one of them: wait for the winner, up to the busy timeout."""
        deadline = time.monotonic() + self.busy_timeout_ms / 1000
        while True:
            try:
                if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                    db.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                busy = "locked" in str(exc) or "busy" in str(exc)
                if not busy or time.monotonic() >= deadline:
                    raise
                time.sleep(0.002)

    def exists(self) -> bool:
        return os.path.exists(self.path)

    def _require(self) -> sqlite3.Connection:
        db = self._conn()
        assert db is not None, "writes are refused before reaching a store that may not create"
        return db

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        db = self._require()  # first: opening may find the store read-only
        if self.read_only:
            raise StorageError(
                f"{self.path} is open read-only ({self._why_read_only}): nothing was written"
            )
        with self._translated("write to"):
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
                groups.refresh(db)  # the search groups this write touched (Q3)
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    @contextlib.contextmanager
    def _translated(self, doing: str) -> Iterator[None]:
        """sqlite3 errors -> one-line StorageError / QueryError naming the file and a way out."""
        try:
            yield
        except sqlite3.OperationalError as exc:
            raise self._operational(exc, doing) from exc
        except sqlite3.DatabaseError as exc:
            raise StorageError(
                f"cannot {doing} {self.path}: {exc} (the file is left in place; if it is "
                "corrupt, move it aside and run the command again to start a fresh archive)"
            ) from exc
        except OSError as exc:
            raise StorageError(f"cannot {doing} {self.path}: {exc.strerror}") from exc

    def _operational(self, exc: sqlite3.OperationalError, doing: str) -> Exception:
        text = str(exc)
        if "locked" in text or "busy" in text:
            return StorageError(
                f"{self.path} is locked by another process (waited {self.busy_timeout_ms} ms); "
                "nothing was changed, try again (or raise memory.busy_timeout_ms)"
            )
        if "fts5" in text:
            return QueryError(
                f"the search query cannot run: {text}",
                hint='quote words that contain punctuation, e.g. "foo-bar"',
            )
        if "full" in text:
            return StorageError(
                f"cannot {doing} {self.path}: the disk is full; nothing was changed"
            )
        return StorageError(f"cannot {doing} {self.path}: {text}")

    def close(self) -> None:
        self._memo.clear()  # a token belongs to one connection
        if self._db is not None:
            self._db.close()
            self._db = None
            if self.leave_wal and not os.path.exists(self.path):
                _remove_left_files(self.path)  # the store went away while it was looked at


def _first_read(db: sqlite3.Connection) -> None:
    """The read that opens (or makes) -wal and -shm, and fails on a file that is no
    database."""
    db.execute("SELECT count(*) FROM sqlite_master").fetchone()


def _identities(path: str) -> tuple[tuple[int, int] | None, ...]:
    """(device, inode) of memory.db, its -wal and its -shm; None for each one missing."""
    found: list[tuple[int, int] | None] = []
    for suffix in ("", "-wal", "-shm"):
        try:
            info = os.stat(path + suffix)
        except OSError:
            found.append(None)
        else:
            found.append((info.st_dev, info.st_ino))
    return tuple(found)


def _remove_left_files(db: str) -> None:
    """Remove the -shm, and the -wal if it holds no frame, beside a memory.db that is gone
    (an inode number says nothing here: a file made again often gets the one its removed
    namesake had). A -wal with frames holds commits: it stays, whoever's it is."""
    for suffix in ("-wal", "-shm"):
        path = db + suffix
        with contextlib.suppress(OSError):
            if os.path.exists(db) or (suffix == "-wal" and os.stat(path).st_size > 0):
                return
            os.unlink(path)
