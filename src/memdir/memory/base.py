"""MemoryBase: what every part of the Memory facade shares — where memory lives, who is
writing (session, surface, agent), whether writing is allowed at all — and the writes that
more than one part makes (an entry through the duplicate guard, a task note), so that no
part calls another."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence

from .. import facts, process, sessions
from ..clock import Clock, iso
from ..errors import ConflictError, DisabledError, MemdirError, StorageError
from ..lazy import lazy
from ..models import Entry, Provenance, Session, Similar
from ..paths import (
    MEMORY_ENV,
    SESSION_ENV,
    STATE_ENV,
    Layout,
    check_memory_root,
    memory_dir_source,
    require_memory_dir,
    require_state_dir,
    resolve_state_dir,
)
from ..settings import Settings, load_settings, with_env
from ..storage import embeddings, open_store
from ..storage.documents import open_documents

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Concatenate, ParamSpec, Self, TypeVar

    from .. import daily, duplicates, entries, search, tasks
    from ..search import index, vectors, worker
    from ..secret_scan import Found
    from ..storage import embedders
    from ..storage.base import Store
    from ..types import Embedder, Surface

    P = ParamSpec("P")
    R = TypeVar("R")
    M = TypeVar("M", bound="MemoryBase")
else:
    search = lazy("memdir.search")  # not on the path of recall, boot or a hook
    daily = lazy("memdir.daily")
    duplicates = lazy("memdir.duplicates")
    entries = lazy("memdir.entries")
    tasks = lazy("memdir.tasks")
    index = lazy("memdir.search.index")
    vectors = lazy("memdir.search.vectors")
    worker = lazy("memdir.search.worker")
    embedders = lazy("memdir.storage.embedders")

SMALL_WRITE = 32  # items a write embeds in the writer's process, at most (~0.4 s)
WRITE_BUDGET = 10.0  # seconds a write waits for the warm worker to embed what it wrote
HITS_EVERY = 60.0  # seconds between two foldings of the hits journal by one Memory's writes


def one_view(method: Callable[Concatenate[M, P], R]) -> Callable[Concatenate[M, P], R]:
    """A call that reads the tiers: in team mode the view is refreshed once for all of it
    (its first read), not at each read it makes (recall reads HOT.md, the entries and the
    notes: each took the view's lock and asked the database). Its own writes render what
    they wrote, so it misses nothing it did itself."""
    import functools

    def call(self: M, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with self.docs.operation():
            return method(self, *args, **kwargs)

    functools.update_wrapper(call, method)  # its name and docstring (help, the docs)
    return call


class MemoryBase:
    """One store, seen by one caller. Cheap to create; the database opens on first use.

    A state dir the caller names (the argument, MEMDIR_STATE_DIR) or a memory root it names
    (MEMDIR_MEMORY_DIR, `memory.path`) must exist: a typo is an error, never a new empty
    store. `create=True` makes them instead. The default places (the nearest .memdir/,
    else ~/.memdir/state) are made on the first write."""

    def __init__(
        self,
        state_dir: str | None = None,
        *,
        session: str | None = None,
        surface: Surface | str = "cli",
        agent: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        clock: Clock = time.time,
        embedder: Embedder | None = None,
        create: bool = False,
    ) -> None:
        env = os.environ if env is None else env
        cwd = os.getcwd() if cwd is None else cwd
        self.state = resolve_state_dir(state_dir, env, cwd)
        require_state_dir(self.state, create)
        self.settings: Settings = with_env(
            load_settings(os.path.join(self.state.path, "config.toml")), env
        )
        memory_dir, named_by = memory_dir_source(self.state.path, self.settings.path, env, cwd)
        check_memory_root(memory_dir, named_by, self.state.path, env)
        require_memory_dir(memory_dir, named_by, self.state.path, create)
        self.layout = Layout(self.state.path, memory_dir)
        process.opened_store(self.state.path, memory_dir)
        self.surface = sessions.check_surface(surface)
        self.agent = agent
        self.clock = clock
        self.store: Store = open_store(self.layout, self.settings)
        # the markdown tiers: files here, rows with a rendered view in team mode
        self.docs = open_documents(self.layout.memory_dir, self.store)
        self.docs.after_render = self._view_rendered
        self._embedder = embedder  # None: the default model, loaded when first needed
        self._vector_cache: search.VectorCache | None = None
        self._hits_folded = float("-inf")  # when this Memory last recorded the hits journal
        self.unembedded = 0  # facts and chunks without a vector when the last search ran
        self.too_big: list[str] = []  # files the last index sync left out for their size
        self._searched = "lexical"  # the mode the last search ran in
        # Set by a front end that embeds in the background (the MCP server's EmbedWorker):
        # called when items need vectors, instead of embedding them in the caller's thread.
        self.embed_later: Callable[[], object] | None = None
        # Set with it: a new fact's comparison by meaning (N1) is left to that embedder too,
        # (fact id, the ids its answer named); the server reports what it finds with the
        # next answer, so a write does not wait ~10 ms for the model and the matrix.
        self.compare_later: Callable[[int, frozenset[int]], object] | None = None
        # Set by the CLI: ask the store's warm worker (vector_worker.py) for vectors rather
        # than load the model in this short-lived process, starting it when need be.
        self.use_worker = False
        self.worker_starting = False  # the last search ranked by words: the worker was not up
        self.model_failed: str | None = None  # ...or the model failed (Q2): why
        self._bulk = False  # inside `bulk()`: writes leave their vectors to the end
        self._owner: MemoryBase | None = None  # set on a companion(): the model is its
        self._companions: list[MemoryBase] = []
        self.session_id: str | None = None
        self._session: Session | None = None
        self._host_seen: dict[str, str | None] = {}  # host process -> its session (K3)
        # The session the environment names (inherited from a parent process): a subagent
        # there cannot switch to another session with --session (U2).
        ambient = env.get(SESSION_ENV) or None
        self._ambient = sessions.check_id(ambient) if ambient and session else None
        self.bind_session(session if session is not None else ambient)

    @property
    def _vectors(self) -> search.VectorCache:
        """The vectors of this process, made on first use (search.VectorCache); a
        companion's are its owner's, as its model is: one matrix for a server's threads."""
        if self._owner is not None:
            return self._owner._vectors
        if self._vector_cache is None:
            self._vector_cache = search.VectorCache()
        return self._vector_cache

    def close(self) -> None:
        """Close the store's connection (`with Memory(...)` does it)."""
        self.store.close()

    def companion(self) -> Self:
        """Another Memory on this store for the same caller, with its own SQLite
        connection and the same model: a server answers reads on it while a long write
        runs on this one, so no read waits for a write's turn (A2)."""
        other = type(self)(
            self.state.path,
            session=self.session_id,
            surface=self.surface,
            agent=self.agent,
            env=self.child_env(),  # the same state dir and memory root, however named
            clock=self.clock,
        )
        other._owner = self
        self._companions.append(other)
        return other

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def path(self) -> str:
        """The memory root: every memory file lives under it (L2)."""
        return self.layout.memory_dir

    def child_env(self) -> dict[str, str]:
        """L5: what a process that memdir starts needs to reach the same memory."""
        env = {STATE_ENV: self.state.path, MEMORY_ENV: self.layout.memory_dir}
        if self.settings.storage_url:  # W1: the same store, however it was named
            from ..settings import DATABASE_SCOPE_ENV, DATABASE_URL_ENV

            env[DATABASE_URL_ENV] = self.settings.storage_url
            env[DATABASE_SCOPE_ENV] = self.settings.storage_scope
        if self.session_id:
            env[SESSION_ENV] = self.session_id
        return env

    def bind_session(self, session_id: str | None) -> None:
        """Act as `session_id` from now on (U4), e.g. a server that started its own session."""
        self.session_id = sessions.check_id(session_id) if session_id else None
        self._session = None
        self._unrecorded = False  # the session is one memdir has not recorded yet (U1)
        if getattr(self, "_ambient", None) == self.session_id:
            self._ambient = None

    @property
    def session(self) -> Session | None:
        """The current session's record (U4), or None for a plain top-level caller. A
        session memdir has not seen (a host's) is a top-level session of this caller's
        surface, not yet recorded (U1): the first write records it (`_adopt`)."""
        if self.session_id and self._session is None:
            found = self.store.get_session(self.session_id)
            if found is None:
                found = sessions.unrecorded(self.session_id, self.surface, None, self._now())
                self._unrecorded = True
            if self._ambient and self._ambient != found.id:
                ambient = self.store.get_session(self._ambient)
                if ambient is not None:
                    sessions.check_may_act_as(ambient, found, self.store.get_session)
            self._session = found
        return self._session

    @property
    def read_only(self) -> bool:
        """Whether this is a subagent session, whose memory is read-only (U2)."""
        session = self.session
        return session is not None and session.is_subagent

    def _now(self) -> str:
        return iso(self.clock())

    def _provenance(self) -> Provenance:
        session = self.session
        surface = session.surface if session is not None else self.surface
        return Provenance(self.session_id, surface, self.agent)

    def _enabled(self, doing: str) -> None:
        if not self.settings.enabled:
            raise DisabledError(
                f"memory is disabled (memory.enabled = false in {self.layout.config}): "
                f"cannot {doing}; nothing was stored"
            )

    def require_writable(self, what: str) -> None:
        """Every write passes here: memory enabled (S), a top-level session (U2) that is
        still open."""
        self._enabled(f"write {what}")
        session = self.session
        sessions.refuse_if_subagent(session)
        if session is not None and session.ended is not None and not self._unrecorded:
            # the record may have changed since it was read: a host that resumes a session
            # (SessionStart, resume) opens it again while a long-lived server holds it
            session = self._session = self.store.get_session(session.id) or session
        if session is not None and session.ended is not None:
            raise ConflictError(
                f"session {session.id} ended at {session.ended}: start a new one to write"
            )
        if session is not None and self._unrecorded:
            self._adopt(session)
        if self.clock() - self._hits_folded >= HITS_EVERY:
            self._fold_hits()

    def _fold_hits(self) -> None:
        """The hits searches left in the store's journal go into the database with a write
        that is made anyway (a search itself never writes it: SearchMemory._note_hits); a
        warm server's writes do it once a minute. Bookkeeping: a store that cannot take
        them keeps the journal for the next one."""
        self._hits_folded = self.clock()
        with contextlib.suppress(MemdirError):
            if self.read_only or not self.store.exists():
                return
            self.store.record_hits({})

    def _adopt(self, session: Session) -> None:
        """U1: record a session memdir had not seen, as it is; a process that recorded it
        first (two host processes at once) wins, and its record is the one used."""
        try:
            self._session = self.store.start_session(
                session.id, session.surface, session.parent_id, session.started
            )
        except ConflictError:
            self._session = self.store.get_session(session.id) or session
        self._unrecorded = False

    def refuse_secrets(self, what: str, **fields: object) -> None:
        """X2, once per write, before anything is written: every field the write stores
        (its text under `text`, names, descriptions, task ids, workflow, step, section...)
        and this caller's provenance (agent, session id, surface) are scanned together."""
        self.refuse_secrets_each(what, [fields])

    def refuse_secrets_each(self, what: str, rows: Iterable[Mapping[str, object]]) -> None:
        """refuse_secrets for each of many writes (an import), in order: the same fields
        scanned, the same first refusal. A value the rows repeat (a category, this caller's
        provenance, a text said twice) is scanned once: the answer is the same."""
        from .. import secret_guard  # only on writes: reads never pay for the patterns

        seen: dict[str, Found | None] = {}
        names: dict[str, str] = {"text": ""}
        for fields in rows:
            for k in fields:
                if k not in names:
                    names[k] = k.replace("_", " ")
            secret_guard.check_fields(
                [
                    *((names[k], v) for k, v in fields.items()),
                    ("agent (--agent)", self.agent),
                    ("session id", self.session_id),
                    ("surface", self.surface),
                ],
                what,
                seen,
            )

    def _count(self, kind: str) -> None:
        if self.session_id:
            self.store.count_write(self.session_id, kind)

    def _wants_vectors(self) -> bool:
        """Whether search here uses vectors: [search] mode semantic or hybrid, or auto,
        with the embeddings extra installed (or a model given)."""
        if self.settings.search_mode == "lexical":
            return False
        return self._model_installed()

    def model_id(self) -> str:
        """Q2: the id of the model whose vectors search here makes and compares (the
        given Embedder's, else [embeddings]'s); loads nothing."""
        if self._embedder is not None:
            return self._embedder.name
        if self.settings.embeddings_provider == "bundled":
            return embeddings.DEFAULT_MODEL  # the CLI's path: storage.embedders not imported
        return embedders.model_id(self.settings.embedding_choice())

    def _model_installed(self) -> bool:
        """Whether the configured model's extra is installed (or a model was given)."""
        if self._embedder is not None:
            return True
        if self.settings.embeddings_provider == "bundled":
            return embeddings.available()
        return embedders.available(self.settings.embedding_choice())

    def _install_hint(self) -> str:
        return embedders.install_hint(self.settings.embedding_choice())

    def _extra(self) -> str:
        return embedders.EXTRAS[self.settings.embeddings_provider]

    def _load_embedder(self) -> Embedder:
        """The configured model, loaded (once a process, storage/embedders.py)."""
        if self.settings.embeddings_provider == "bundled":
            return embeddings.default_embedder()
        return embedders.load(self.settings.embedding_choice())

    @contextlib.contextmanager
    def bulk(self) -> Iterator[None]:
        """Many writes in a row (an import): none embeds on its own; the caller embeds
        them all at the end in one pass with progress (`embed_pending`)."""
        saved, self._bulk = self._bulk, True
        try:
            yield
        finally:
            self._bulk = saved

    def _embed_written(self, fact_ids: Sequence[int] = (), files: Sequence[str] = ()) -> None:
        """What one small write made gets its vectors now, so the next search finds it by
        meaning: in a server, from its background worker; elsewhere inline, loading the
        model if need be (~0.35 s against the ~30 ms of a CLI write) unless [search]
        embed_on_write = "loaded", which leaves it to `memdir reindex` or the server (until
        then search ranks it by its words). Never fails the write."""
        if self._bulk:
            return
        if self.embed_later is not None:
            self.embed_later()
            return
        load = self.settings.search_embed_on_write == "always"
        places = self._worker_up() if self._embedder is None else None
        if self._embedder is None and not load and places is None:
            return  # the CLI's path: not even a look for the extra
        if len(fact_ids) + len(files) > SMALL_WRITE or not self._wants_vectors():
            return
        paths = [os.path.relpath(f, self.layout.memory_dir).replace(os.sep, "/") for f in files]
        try:
            if paths:
                index.sync(self.layout, self.store)  # the written file's chunks
            model = self.model_id()
            rows = self.store.unembedded_items(model, list(fact_ids), paths)
            if not rows or len(rows) > SMALL_WRITE:
                # Q2: a big write (a long note, many blocks) is not embedded here: it
                # would keep the writer busy for minutes; reindex or the server embed it,
                # and until then search ranks it by its words and says so
                return
            if places is not None:  # the warm worker embeds them (~5 ms), no model here
                request = {"op": "embed", "model": model, "facts": list(fact_ids), "paths": paths}
                if "embedded" in (worker.call(places, request, WRITE_BUDGET) or {}):
                    return
            embedder = self._embedder or self._load_embedder()
            self._embedder = embedder
            vectors.embed_rows(self.store, embedder, rows)
        except MemdirError:
            pass  # locked, no extra, or a file gone meanwhile: it waits, as a CLI write does

    def _worker_up(self) -> worker.Places | None:
        """The store's warm worker's places when this process uses it and its socket is
        there (a stat: whether it answers is known when asked)."""
        if not self.use_worker or self._owner is not None or self.embed_later is not None:
            return None
        if self.settings.search_worker_idle <= 0 or self.settings.search_mode == "lexical":
            return None
        places = worker.Places(self.state.path)
        return places if os.path.exists(places.socket) else None

    def _view_rendered(self) -> None:
        """Team mode: global entries were rendered from the rows: MEMORY.md is derived
        from them on each machine (W1)."""
        entries.follow_view(self.layout, self.store)

    # -- what more than one part writes through (a part never calls another part) ----------

    def _write_entry(
        self,
        name: str,
        description: str,
        content: str,
        task: str | None,
        workflow: str | None,
        expected: str | None = None,
    ) -> tuple[Entry, bool]:
        # the content's size was checked by the caller; X2 here, over every stored field
        self.refuse_secrets(
            "entry", text=content, name=name, description=description, task=task, workflow=workflow
        )
        provenance = {"agent": self.agent, "task": task, "workflow": workflow}
        entry, created = entries.write(
            self.layout,
            self.store,
            name,
            description,
            content,
            self._now(),
            provenance,
            twins=lambda: self._entry_twins(name, content),
            expected=expected,
            docs=self.docs,
        )
        if entry.duplicate:
            same = duplicates.named_hint("entry", entry.name, self.settings.marker_prefix)
            return entry._replace(hint=same), False
        self._count("entries")
        self._embed_written(files=[self.layout.entry(name)])
        similar = duplicates.merged(entry.similar, self._similar_files("entry", name, content))
        hint = duplicates.similar_hint(similar, name, self.settings.marker_prefix)
        return entry._replace(similar=similar, hint=hint), created

    def _entry_twins(self, name: str, content: str) -> tuple[Similar, ...]:
        """The other entries that say this or nearly this. Only entries whose cached
        fingerprint could match (the body's key, shared band keys) are read."""
        prints = entries.fingerprints(self.layout, self.store)
        others = []
        for other in duplicates.candidates(name, content, prints):
            with contextlib.suppress(MemdirError):  # a symlink out of the root (X1)
                text = entries.text_of(self.layout, other) or ""
                others.append((other, duplicates.body_of(text)))
        return duplicates.among("entry", name, content, others, self.settings.duplicate_lexical)

    def _similar_files(self, kind: str, name: str, content: str) -> tuple[Similar, ...]:
        """Entries or procedures that mean nearly this, when the embedding model is loaded
        (a report: never fails the write)."""
        if self._embedder is None:
            return ()
        semantic = (self._embedder, self.settings.duplicate_semantic, self._vectors)
        try:
            return duplicates.similar_files(self.store, kind, name, content, semantic)
        except MemdirError:
            return ()

    def _lineage(self, task_id: str) -> list[str]:
        try:
            registry = {t.id: t for t in self.store.all_tasks()}
        except StorageError:
            registry = {}  # a broken memory.db: the task's own notes still recall (Z)
        return tasks.lineage(registry, task_id)

    def _log(self, text: str, section: str | None = None) -> daily.DailyWrite:
        """E1: a timestamped entry in today's log, under `## HH:MM` or `section`: the
        daily_append tool's write, and memorize's for a task note with no task (M3)."""
        facts.check_content(text, self.settings.max_entry_bytes, "log entry")
        self.require_writable("the daily log")
        self.refuse_secrets("log entry", text=text, section=section)
        result = daily.append(self.layout, text, self.clock(), section, self.docs)
        self._count("daily")
        self._embed_written(files=[os.path.join(self.layout.memory_dir, result.path)])
        return result

    def _add_note(self, task_id: str, content: str, workflow: str | None, step: str | None) -> bool:
        """T1/T2 (tasks.add_note, and memorize's task blocks): append a note to the task;
        False when it was there already (a retry)."""
        self.layout.task_notes(task_id)
        content = facts.check_content(content, self.settings.max_entry_bytes, "note")
        self.require_writable("task notes")
        self.refuse_secrets("note", text=content, task_id=task_id, workflow=workflow, step=step)
        added = tasks.add_note(
            self.layout, task_id, content, self._now(), workflow, step, self.agent, self.docs
        )
        if added:
            self._count("notes")
            self._embed_written(files=[self.layout.task_notes(task_id)])
        return added
