"""Sessions (U1-U4), the task registry (T3), the global entry cache (G4) and small named
values (the distillation watermark)."""

from __future__ import annotations

import sqlite3

from ... import advice
from ...errors import ConflictError, NotFoundError
from ...models import Session, Task
from ..rows import CachedEntry
from .connection import Connection


class SessionRows(Connection):
    # -- sessions ----------------------------------------------------------------------

    def start_session(
        self, session_id: str, surface: str, parent_id: str | None, now: str
    ) -> Session:
        with self._write() as db:
            try:
                db.execute(
                    "INSERT INTO sessions (id, surface, parent_id, started) VALUES (?, ?, ?, ?)",
                    (session_id, surface, parent_id, now),
                )
            except sqlite3.IntegrityError as exc:
                raise ConflictError(f"a session with id {session_id!r} exists already") from exc
        return Session(session_id, surface, parent_id, now, None, {})

    def get_session(self, session_id: str) -> Session | None:
        db = self._conn()
        if db is None:
            return None
        with self._translated("read"):
            return self._session(db, session_id)

    def end_session(self, session_id: str, now: str) -> Session:
        with self._write() as db:
            db.execute("UPDATE sessions SET ended = ? WHERE id = ?", (now, session_id))
            session = self._session(db, session_id)
        assert session is not None
        return session

    def list_sessions(self, limit: int) -> list[Session]:
        db = self._conn()
        if db is None:
            return []
        with self._translated("read"):
            ids = db.execute(
                "SELECT id FROM sessions WHERE parent_id IS NULL ORDER BY started DESC, id LIMIT ?",
                (limit,),
            ).fetchall()
            return [s for (sid,) in ids if (s := self._session(db, sid)) is not None]

    def count_write(self, session_id: str, kind: str) -> None:
        with self._write() as db:
            db.execute(
                "INSERT INTO session_writes (session_id, kind, n) VALUES (?, ?, 1) "
                "ON CONFLICT (session_id, kind) DO UPDATE SET n = n + 1",
                (session_id, kind),
            )

    def _session(self, db: sqlite3.Connection, session_id: str) -> Session | None:
        row = db.execute(
            "SELECT id, surface, parent_id, started, ended FROM sessions WHERE id = ?",
            (session_id,),
        ).fetchone()
        if row is None:
            return None
        # Facts carry their session (F5), so their count is derived; file writes are tallied.
        counts = dict(
            db.execute("SELECT kind, n FROM session_writes WHERE session_id = ?", (session_id,))
        )
        (facts,) = db.execute(
            "SELECT count(*) FROM facts WHERE session_id = ?", (session_id,)
        ).fetchone()
        if facts:
            counts["facts"] = facts
        sid, surface, parent_id, started, ended = row
        return Session(sid, surface, parent_id, started, ended, counts)

    # -- tasks (T3) ----------------------------------------------------------------------

    def start_task(self, task_id: str, parent_id: str | None, now: str) -> Task:
        """Register a running task; starting it again while it runs is a no-op (retries)."""
        with self._write() as db:
            existing = self._task(db, task_id)
            if existing is not None:
                if existing.state != "running":
                    raise ConflictError(
                        f"task {task_id} already ended ({existing.state} at {existing.ended}); "
                        "give the new task a new id"
                    )
                if existing.parent_id != parent_id:
                    raise ConflictError(
                        f"task {task_id} is running already with parent {existing.parent_id}"
                    )
                return existing
            if parent_id is not None and self._task(db, parent_id) is None:
                raise NotFoundError(
                    f"unknown parent task {parent_id!r}: start it first: "
                    f"{advice.task_start(parent_id)}"
                )
            db.execute(
                "INSERT INTO tasks (id, parent_id, state, started) VALUES (?, ?, 'running', ?)",
                (task_id, parent_id, now),
            )
        return Task(task_id, parent_id, "running", now, None)

    def end_task(self, task_id: str, state: str, now: str) -> Task:
        with self._write() as db:
            task = self._task(db, task_id)
            if task is None:
                raise NotFoundError(
                    f"unknown task {task_id!r}: tasks are registered with "
                    f"{advice.task_start(task_id)}"
                )
            if task.state != "running":
                raise ConflictError(f"task {task_id} already ended ({task.state} at {task.ended})")
            db.execute("UPDATE tasks SET state = ?, ended = ? WHERE id = ?", (state, now, task_id))
        return task._replace(state=state, ended=now)

    def get_task(self, task_id: str) -> Task | None:
        db = self._conn()
        if db is None:
            return None
        with self._translated("read"):
            return self._task(db, task_id)

    def all_tasks(self) -> list[Task]:
        db = self._conn()
        if db is None:
            return []
        with self._translated("read"):
            rows = db.execute("SELECT id, parent_id, state, started, ended FROM tasks").fetchall()
        return [Task(*row) for row in rows]

    def _task(self, db: sqlite3.Connection, task_id: str) -> Task | None:
        row = db.execute(
            "SELECT id, parent_id, state, started, ended FROM tasks WHERE id = ?", (task_id,)
        ).fetchone()
        return None if row is None else Task(*row)

    # -- the global entry cache (G4) -----------------------------------------------------

    def entry_cache(self, with_meta: bool = True) -> dict[str, CachedEntry]:
        """name -> (mtime_ns, size, description, updated, error, metadata JSON, body key,
        band keys) of each global entry file when last read; without `with_meta` the JSON
        is left out ("")."""
        db = self._conn()
        if db is None:
            return {}
        meta = "meta" if with_meta else "''"
        with self._translated("read"):
            rows = db.execute(
                f"SELECT name, mtime_ns, size, description, updated, error, {meta}, body_key, "
                "sketch FROM entry_cache"
            ).fetchall()
        return {row[0]: CachedEntry(*row[1:]) for row in rows}

    def update_entry_cache(self, changed: dict[str, CachedEntry], gone: list[str]) -> None:
        if self._conn() is None:
            return
        with self._write() as db:
            db.executemany("DELETE FROM entry_cache WHERE name = ?", [(n,) for n in gone])
            db.executemany(
                "INSERT OR REPLACE INTO entry_cache "
                "(name, mtime_ns, size, description, updated, error, meta, body_key, sketch) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(name, *row) for name, row in changed.items()],
            )

    # -- small named values (the distillation watermark) ---------------------------------

    def get_value(self, key: str) -> str | None:
        db = self._conn()
        if db is None:
            return None
        with self._translated("read"):
            row = db.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_value(self, key: str, value: str) -> None:
        with self._write() as db:
            db.execute("INSERT OR REPLACE INTO kv (key, value) VALUES (?, ?)", (key, value))
