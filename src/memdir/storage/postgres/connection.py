"""The connection every part of PostgresStore shares: the scope's schema, its migrations,
the read-only look, and the one way to write.

Every write is one transaction that first takes the scope's advisory lock
(`pg_advisory_xact_lock`): writes to one scope are serialized, as memory.db's single
writer lock serializes them, so the duplicate guard's check-then-insert and the ids given
in advance (max + 1, as SQLite gives them) hold across processes and hosts. Readers never
wait for it. A write killed or cut off mid-transaction is rolled back by the server: no
half-written record.

A connection the server ended between two calls (a restart, a failover, an idle timeout,
pg_terminate_backend) is opened again by the next call, which then runs as usual: the
server says so on the socket, and a call looks there first (`_live`: a poll, no round
trip, unless something arrived). A call that fails on a lost connection anyway (it went
during the call, or without a word) raises one StorageError and is never taken as done:
nothing is retried behind the caller's back. A write cut off before its COMMIT was sent
is rolled back by the server, so the message says nothing was stored; one cut off while
committing may have committed or not (the answer was lost), and the message says that
instead: look before writing it again.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

from ...errors import StorageError
from . import lexical
from .schema import LATEST, MIGRATIONS, SETTING
from .url import redact, schema_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    import psycopg

    Cursor = psycopg.Cursor[tuple[object, ...]]

LOCK_CLASS = 0x6D656D64  # "memd": the advisory lock space of memdir's scopes
IDLE = 0  # psycopg.pq.TransactionStatus.IDLE: no transaction open (not imported to say it)
# A server gone quiet (a dead host, a cut network, no RST) must not hold a call, and the
# view's lock a write holds around it, for ever: TCP keepalives find a dead peer of an idle
# connection in about a minute (30 s idle, then 3 probes 10 s apart), tcp_user_timeout one
# that stopped acknowledging what was sent; a URL that sets any of them keeps its own.
KEEPALIVES = {
    "keepalives": "1",
    "keepalives_idle": "30",
    "keepalives_interval": "10",
    "keepalives_count": "3",
    "tcp_user_timeout": "60000",
}
# A statement may take this long beyond memory.busy_timeout_ms (its wait for a lock):
# nothing memdir sends runs for minutes; a server that does not answer is reported instead.
STATEMENT_MS = 120_000


class Connection:
    """One scope of one database, connected on first use; the base of PostgresStore."""

    def __init__(
        self,
        url: str,
        scope: str,
        *,
        busy_timeout_ms: int = 10_000,
        create: bool = True,
        read_only: bool = False,
        memory_dir: str | None = None,
    ) -> None:
        """`memory_dir`: the memory root, made (as SQLite makes it for memory.db) when the
        store is first opened for writing: the files of the tiers live there."""
        self.url = url
        self.memory_dir = memory_dir
        self.scope = scope
        self.schema = schema_of(scope)
        self.path = f"{redact(url)} (scope {scope})"  # what messages name: never a password
        self.busy_timeout_ms = busy_timeout_ms
        self.create = create and not read_only
        self.read_only = read_only
        self._db: psycopg.Connection[tuple[object, ...]] | None = None
        self._present = False  # the scope's schema exists (a look finds it or not)
        self._dirty: set[str] = set()
        # a bulk write renews the planner's statistics after it commits: a new scope's
        # tables have none, and a plan made without them can read every row per row
        self._analyze = False  # search groups the open write touched (groups.py)
        self._lock = threading.RLock()  # one connection: one statement at a time
        # pgvector (pgvector.py): whether the server ranks the vectors, and the line saying
        # how they are ranked (doctor); found again on each connection
        self._pgvector = False
        self.vector_ranking = "in Python (numpy)"

    def _connect(self) -> psycopg.Connection[tuple[object, ...]]:
        import psycopg
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        try:
            given = conninfo_to_dict(self.url)
        except psycopg.Error:
            given = {}  # not parsed here: connect() says what is wrong with it
        extra = {key: value for key, value in KEEPALIVES.items() if key not in given}
        db = psycopg.connect(
            make_conninfo(self.url, **extra),
            autocommit=True,
            connect_timeout=10,
            application_name="memdir",
        )
        try:
            db.execute(f"SET lock_timeout = '{int(self.busy_timeout_ms)}ms'")
            db.execute(f"SET statement_timeout = '{int(self.busy_timeout_ms) + STATEMENT_MS}ms'")
            if self.read_only:
                db.execute("SET default_transaction_read_only = on")
            # the search path confines every statement to the scope; the setting is what
            # the scope's row-level security admits (schema.secure), beside it
            db.execute(f"SET search_path TO \"{self.schema}\"; SET {SETTING} TO '{self.schema}'")
        except BaseException:
            db.close()
            raise
        return db

    def _conn(self) -> Cursor | None:
        """A cursor on the open connection; None when the scope does not exist and may not
        be made (a look, or memory turned off)."""
        with self._translated("connect to"):
            db = self._live()
            if not self._present:
                found = db.execute(
                    "SELECT 1 FROM pg_namespace WHERE nspname = %s", (self.schema,)
                ).fetchone()
                if found is None and not self.create:
                    return None
                if not self.read_only:
                    self._migrate(db)
                    if self.memory_dir is not None:
                        import os

                        os.makedirs(self.memory_dir, exist_ok=True)
                self._use_pgvector(db)
                self._present = True
            return db.cursor()

    def exists(self) -> bool:
        """Whether the scope's schema exists (looked up, never made)."""
        with self._lock, self._translated("connect to"):
            if self._present:
                return True
            found = (
                self._live()
                .execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (self.schema,))
                .fetchone()
            )
            return found is not None

    def _live(self) -> psycopg.Connection[tuple[object, ...]]:
        """The open connection, connected (again) when there is none or the server ended
        it since the last call. An idle connection's socket holds nothing unless the server
        sent something unasked (we LISTEN to nothing): then, and only then, a round trip
        tells whether it is still there."""
        import select

        import psycopg

        db = self._db
        if db is not None and not db.closed and db.info.transaction_status == IDLE:
            try:
                sent = select.select([db.fileno()], [], [], 0)[0]
                if sent:
                    db.execute("SELECT 1")
            except (OSError, ValueError, psycopg.OperationalError):
                with contextlib.suppress(Exception):
                    db.close()
        if db is None or db.closed:
            self._db, self._present = self._connect(), False
        assert self._db is not None
        return self._db

    def _migrate(self, db: psycopg.Connection[tuple[object, ...]]) -> None:
        """Bring the scope's schema up to date, under its lock: when several processes open
        a new scope at once, exactly one creates it."""
        if self._version(db) >= LATEST:
            return
        with db.transaction():
            db.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (LOCK_CLASS, self.schema))
            # made only when missing: IF NOT EXISTS asks for the right to create first, which
            # a role granted a scope (not the database, not the schema) does not have
            found = db.execute(
                "SELECT to_regclass(quote_ident(%s) || '.schema_migrations') IS NOT NULL "
                "FROM pg_namespace WHERE nspname = %s",
                (self.schema, self.schema),
            ).fetchone()
            if found is None:
                db.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
            if found is None or not found[0]:
                db.execute(
                    "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
                    "name TEXT NOT NULL, applied TIMESTAMPTZ NOT NULL DEFAULT now())"
                )
            current = self._version(db)
            cur = db.cursor()
            for version, name, apply in MIGRATIONS:
                if version > current:
                    apply(cur)
                    cur.execute(
                        "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                        (version, name),
                    )

    def row_security(self) -> str:
        """Whether row-level security holds the scope's tables (schema.secure), and if not,
        why: one line for doctor."""
        from .schema import tables

        with self._read("check") as cur:
            if cur is None:
                return "off: the scope does not exist yet"
            found = tables(cur, self.schema)
            cur.execute(
                "SELECT current_user, rolsuper, rolbypassrls FROM pg_roles "
                "WHERE rolname = current_user"
            )
            row = cur.fetchone()
        role, bypass = ("?", False) if row is None else (str(row[0]), bool(row[1] or row[2]))
        open_ = [t for t in found if not t.secured]
        if not open_:
            if bypass:
                return (
                    f"on, but not for this role: {role} is a superuser or has BYPASSRLS "
                    "(connect as a role without them to be held by it)"
                )
            return f"on: every table of {self.schema} admits only this scope's connections"
        names = ", ".join(t.name for t in open_[:3]) + (", ..." if len(open_) > 3 else "")
        others = sorted({t.owner for t in found if not t.owned})
        if others:
            return (
                f"off: {len(open_)} of {len(found)} tables ({names}) lack it, and role {role} "
                f"does not own the scope's tables (owner {', '.join(others)}), so its "
                "migration left it off; the owner can turn it on (docs/storage.md)"
            )
        return (
            f"off: {len(open_)} of {len(found)} tables ({names}) lack it (taken off since "
            "it was made); the owner can turn it on (docs/storage.md)"
        )

    def _use_pgvector(self, db: psycopg.Connection[tuple[object, ...]]) -> None:
        """pgvector when it can be had; a store never fails for it: anything but a lost
        connection leaves the Python ranking, and doctor says why."""
        import psycopg

        try:
            self._find_pgvector(db)
        except psycopg.OperationalError:
            raise
        except psycopg.Error as exc:
            self._pgvector = False
            self.vector_ranking = (
                f"in Python (numpy): pgvector could not be used: {self._said(exc)}"
            )

    def _find_pgvector(self, db: psycopg.Connection[tuple[object, ...]]) -> None:
        """Use pgvector when the server has it (pgvector.py): its schema on the search path,
        its type known to the connection, and the scope's `embedding` column there (a
        writer adds and fills it, under the scope's lock)."""
        from . import pgvector

        self._pgvector = False
        found, self.vector_ranking = pgvector.detect(db, not self.read_only, LOCK_CLASS)
        if found is None:
            return
        db.execute(f'SET search_path TO "{self.schema}", "{found}"')
        pgvector.register(db)
        cur = db.cursor()
        if not self.read_only and (not pgvector.has_column(cur) or pgvector.unfilled(cur)):
            with db.transaction():
                cur.execute(
                    "SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (LOCK_CLASS, self.schema)
                )
                pgvector.ensure_column(cur)
        self._pgvector = pgvector.has_column(cur)
        if not self._pgvector:
            self.vector_ranking = (
                "in Python (numpy): pgvector is there, the scope's vectors are not in its "
                "form yet (the next write brings them)"
            )
        elif pgvector.unfilled(cur):
            self.vector_ranking += (
                f"; {pgvector.unfilled(cur)} vectors are not in its form yet and not ranked "
                "(the next write fills them)"
            )

    def _version(self, db: psycopg.Connection[tuple[object, ...]]) -> int:
        found = db.execute(
            "SELECT 1 FROM pg_tables WHERE schemaname = %s AND tablename = 'schema_migrations'",
            (self.schema,),
        ).fetchone()
        if found is None:
            return 0
        row = db.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()
        return int(str(row[0])) if row else 0

    def _require(self) -> Cursor:
        cur = self._conn()
        assert cur is not None, "writes are refused before reaching a store that may not create"
        return cur

    @contextlib.contextmanager
    def _write(self) -> Iterator[Cursor]:
        if self.read_only:
            raise StorageError(f"{self.path} is open read-only (a look only): nothing was written")
        with self._lock:
            cur = self._require()
            assert self._db is not None
            committing = False
            with self._translated("write to", lambda: committing):
                with self._db.transaction():
                    cur.execute(
                        "SELECT pg_advisory_xact_lock(%s, hashtext(%s))",
                        (LOCK_CLASS, self.schema),
                    )
                    self._dirty = set()
                    yield cur
                    self._refresh_groups(cur)
                    committing = True  # leaving the block sends COMMIT
            if self._analyze:
                self._analyze = False
                self._renew_statistics(cur)

    def _renew_statistics(self, cur: Cursor) -> None:
        """ANALYZE after a bulk write. The write has committed: a failure here is not the
        write's (the planner's statistics wait for the next one), so it is not reported as
        the write failing; a connection lost here is opened again by the next call."""
        import psycopg

        try:
            cur.execute(  # this scope's tables (the search path), not the database's
                "ANALYZE facts, fact_sketch, vectors, chunks, search_groups, lex_docs, "
                "lex_terms, lex_stats"
            )
        except psycopg.Error:
            self._analyze = True
            if self._db is not None and self._db.closed:
                self._db = None

    @contextlib.contextmanager
    def _read(self, doing: str = "read") -> Iterator[Cursor | None]:
        """A cursor for reading (None: nothing stored yet), errors translated."""
        with self._lock:
            cur = self._conn()
            with self._translated(doing):
                yield cur

    def _refresh_groups(self, cur: Cursor) -> None:
        """Set by the groups part (store.py): bring the touched groups up to date."""

    @contextlib.contextmanager
    def _translated(
        self, doing: str, committing: Callable[[], bool] = lambda: False
    ) -> Iterator[None]:
        """psycopg errors -> one-line StorageError naming the database (no password).
        `committing`: whether the write's COMMIT was under way (its outcome unknown)."""
        import psycopg  # loaded already: a store of this backend connected with it

        try:
            yield
        except psycopg.errors.ReadOnlySqlTransaction as exc:
            raise StorageError(f"{self.path} is open read-only: nothing was written") from exc
        except psycopg.errors.LockNotAvailable as exc:
            raise StorageError(
                f"{self.path} is locked by another writer (waited {self.busy_timeout_ms} ms); "
                "nothing was changed, try again (or raise memory.busy_timeout_ms)"
            ) from exc
        except psycopg.errors.QueryCanceled as exc:
            waited = self.busy_timeout_ms + STATEMENT_MS
            if committing():
                raise StorageError(
                    f"cannot tell whether the write to {self.path} was stored: no answer "
                    f"within {waited} ms (look before writing it again)"
                ) from exc
            raise StorageError(
                f"{self.path} did not answer within {waited} ms (statement_timeout): nothing "
                "was taken as done; check the server's load and the network, then try again"
            ) from exc
        except psycopg.OperationalError as exc:
            if self._db is not None and self._db.closed:
                self._db = None  # the next call connects again
            if committing():
                raise StorageError(
                    f"cannot tell whether the write to {self.path} was stored: "
                    f"{self._said(exc)} (the connection went while it committed; look "
                    "before writing it again)"
                ) from exc
            raise StorageError(
                f"cannot {doing} {self.path}: {self._said(exc)} (nothing was taken as done: "
                "check that the server is up and the URL right, then try again)"
            ) from exc
        except psycopg.Error as exc:
            raise StorageError(f"cannot {doing} {self.path}: {self._said(exc)}") from exc

    def _said(self, exc: BaseException) -> str:
        """The server's message, first line, with anything of the URL's secret removed."""
        text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        from urllib.parse import urlsplit

        with contextlib.suppress(ValueError):
            secret = urlsplit(self.url).password
            if secret:
                text = hide(text, secret)
        return text

    def __del__(self) -> None:
        """A store dropped without close() (as a SQLite one may be) closes its connection
        rather than leave psycopg to warn about it."""
        db = getattr(self, "_db", None)
        if db is not None:
            with contextlib.suppress(Exception):
                db.close()

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                with contextlib.suppress(Exception):
                    self._db.close()
                self._db = None
                self._present = False


__all__ = ["LOCK_CLASS", "Connection", "lexical"]


SHORT_SECRET = 6  # a password shorter than this is masked only where it stands alone


def hide(text: str, secret: str) -> str:
    """`text` with `secret` replaced by `***`: everywhere, or, for a password too short to
    be told from the letters of words (password `p` would turn "port" into "***ort"), where
    no letter or digit touches it."""
    if len(secret) >= SHORT_SECRET:
        return text.replace(secret, "***")
    import re

    return re.sub(rf"(?<![^\W_]){re.escape(secret)}(?![^\W_])", "***", text)
