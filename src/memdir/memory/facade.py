"""The Memory facade: the one library API that the CLI, the MCP server and the agent tools
call. Its parts live by concept: MemoryBase (where, who, whether writing is allowed),
FactMemory (the fact archive), WorkflowMemory (task and global memory), WorkspaceMemory
(episodic memory and the workspace); this module adds hot memory, search, procedures and
sessions.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping

from .. import advice, facts, procedures, search, sessions
from ..clock import iso
from ..errors import (
    ConflictError,
    MemdirError,
    MissingExtraError,
    NotFoundError,
    StorageError,
    ValidationError,
)
from ..lazy import lazy
from ..models import Hit, HotWrite, Ingested, Procedure, Session, Similar
from ..paths import (
    PROJECT_DIR,
    check_memory_root,
    git_work_tree,
    memory_dir_source,
    resolve_state_dir,
)
from ..records import Record
from ..settings import config_template, load_settings
from ..storage import embeddings, files
from ..storage.embeddings import DEFAULT_MODEL
from .agent import WorkspaceMemory
from .facts import FactMemory
from .tasks import WorkflowMemory

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .. import duplicates, hot, markers
    from ..storage.embeddings import Embedder
else:
    duplicates = lazy("memdir.duplicates")
    hot = lazy("memdir.hot")
    markers = lazy("memdir.markers")


HITS_EVERY = 60.0  # seconds between two writes of the facts searches found
INSTALL_SHOWN = "search.notice"  # kv: the store was told search is lexical only
_install_shown = False  # ...or, when the store could not record it, this process was


class Memory(FactMemory, WorkflowMemory, WorkspaceMemory):
    """One store, seen by one caller. Cheap to create; the database opens on first use.

    Memory(state_dir=None, *, session=None, surface="cli", agent=None, env=None, cwd=None,
    clock=time.time, create=False): the state dir resolves as L1 says when not given. A
    state dir or memory root named by the caller must exist unless `create` (see
    MemoryBase).
    """

    def hot(self) -> str:
        """HOT.md as it is on disk (`hot show`)."""
        return hot.read(self.layout)

    def hot_injected(self) -> str:
        """HOT.md as it is handed to a model (the MCP instructions and resource, recall,
        boot): within its cap whatever a hand edit put on disk, saying so when cut."""
        return hot.shown(hot.read(self.layout), self.settings.hot_cap_chars)

    def hot_set(self, text: str) -> HotWrite:
        self.require_writable("hot")
        self.refuse_secrets("hot memory text", text=text)
        from ..quoting import hot_text

        return self._hot_update(lambda _current: hot_text(text), replace=True)

    def hot_append(self, text: str) -> HotWrite:
        self.require_writable("hot")
        self.refuse_secrets("hot memory text", text=text)
        return self._hot_update(lambda current: hot.appended(current, text))

    def hot_remove(self, *, line: str | None = None, section: str | None = None) -> HotWrite:
        if (line is None) == (section is None):
            raise ValidationError("remove either a line or a section of hot memory, not both")
        self.require_writable("hot")
        if line is not None:
            return self._hot_update(lambda current: hot.without_line(current, line))
        assert section is not None
        return self._hot_update(lambda current: hot.without_section(current, section))

    def _hot_update(self, change: Callable[[str], str], replace: bool = False) -> HotWrite:
        result = hot.update(
            self.layout, self.settings.hot_cap_chars, change, replace=replace, now=self._now()
        )
        self._count("hot")
        return result

    def search(
        self,
        query: str,
        *,
        category: str | None = None,
        limit: int = 10,
        since: str | None = None,
        kinds: str | list[str] | tuple[str, ...] | None = None,
        mode: str | None = None,
        min_score: float | None = None,
        as_of: str | None = None,
    ) -> list[Hit]:
        """Q1-Q3: every tier (or `kinds` of them), best first. `mode` lexical, semantic or
        hybrid (default: [search] mode, hybrid when the embeddings extra is installed);
        `min_score` drops semantic candidates below that cosine (default 0.5). `as_of`
        (a date means its end): the facts that held then, superseded ones included; only
        facts keep a history, so only facts are searched, lexically."""
        if category is not None:
            facts.check_category(category)
        when = facts.normalize_as_of(as_of)
        if min_score is not None and (
            isinstance(min_score, bool) or not isinstance(min_score, int | float)
        ):
            raise ValidationError(f"bad min_score {min_score!r}: a number such as 0.5")
        wanted_kinds = search.check_kinds(kinds)
        settings = self.settings
        embedder = None
        self.too_big = []
        if when is not None:  # the past: facts only, lexical (superseded facts keep no vector)
            run_mode, wanted_kinds = "lexical", ("fact",)
        else:
            run_mode = search.effective_mode(self.search_mode(mode), query)
            # Keeping the index current writes, and a search must not fail because another
            # process holds the write lock: then it answers from the index as it stands.
            with contextlib.suppress(StorageError):
                self.sync_index()
        self.unembedded, self._searched = 0, run_mode
        if run_mode != "lexical":
            # Issue 11: a search embeds its question only. What has no vector yet is ranked
            # by its words. The model is loaded when there are vectors to compare the
            # question with, or when a server holds it (or is loading it) anyway.
            model = self._embedder.name if self._embedder is not None else DEFAULT_MODEL
            stored = 0
            with contextlib.suppress(StorageError):
                self.unembedded = self.store.count_unembedded(model)
                stored = self.store.vector_generation(model)[0]
            if stored or self.embed_later is not None:
                embedder = self.embedder()
            if self.unembedded and self.embed_later is not None:
                self.embed_later()  # another process wrote them, or a hand edit
        hits = search.search(
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
        )
        self._note_hits(hits)
        return hits

    def _note_hits(self, hits: list[Hit]) -> None:
        """Remember which facts a search found (doctor: facts never recalled). Written at
        once when nothing was written for a minute, else with a later search or on close:
        a warm server pays one small write a minute, not one per search. A subagent's
        searches and a store that cannot be written are left out: bookkeeping never fails
        a search."""
        if not self.settings.enabled:
            return
        now = self._now()
        for hit in hits:
            if hit.kind == "fact" and hit.id is not None:
                self._hits[hit.id] = now
        if self._hits and self.clock() - self._hits_flushed >= HITS_EVERY:
            self.flush_hits()

    def flush_hits(self) -> None:
        for other in self._companions:
            other.flush_hits()  # type: ignore[attr-defined]
        hits, self._hits = self._hits, {}
        self._hits_flushed = self.clock()
        if not hits or not os.path.exists(self.layout.db):
            return
        with contextlib.suppress(MemdirError):
            if not self.read_only:
                self.store.record_hits(hits)

    def close(self) -> None:
        self.flush_hits()
        super().close()

    def search_mode(self, mode: str | None = None) -> str:
        """The mode a search runs in: `mode`, else [search] mode; "auto" is hybrid when the
        embeddings extra is installed. Semantic without the extra is a clear error."""
        wanted = mode if mode is not None else self.settings.search_mode
        if wanted == "auto":
            return "hybrid" if self._embedder is not None or embeddings.available() else "lexical"
        run = search.check_mode(wanted)
        if run != "lexical" and self._embedder is None and not embeddings.available():
            raise MissingExtraError(embeddings.install_hint())
        return run

    def embedder(self) -> Embedder:
        if self._owner is not None:  # a companion shares its owner's model (one in memory)
            owner: Memory = self._owner  # type: ignore[assignment]
            return owner.embedder()
        if self._embedder is None:
            self._embedder = embeddings.default_embedder()
        return self._embedder

    def search_notice(self) -> str | None:
        """What a front end should say about the last search: the files too big to index
        (issue 12: never silently unsearchable), then the embedding note below."""
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
        """Q2, issue 11: what a front end should say about the last search, if anything:
        how many items it ranked by their words alone for want of a vector, and how they
        get one; or, once per store, that search is lexical only without the embeddings
        extra, with the command that installs it from where memdir was installed."""
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
            else:
                how = f"to embed {them}: {advice.reindex()}"
            return f"{items}: {seen}; {how}"
        if self._embedder is not None or embeddings.available() or not self.settings.enabled:
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
        return f"search is lexical only: {embeddings.install_hint()}"

    def write_procedure(self, name: str, content: str) -> Procedure:
        """P1: create or overwrite. The name is the identity (X5): writing exactly what
        the procedure holds changes nothing (the answer has `duplicate` set); other
        procedures with the same or a near body are named in `similar`, never refused."""
        self.layout.procedure(name)  # validates the name before anything else
        facts.check_content(content, self.settings.max_entry_bytes, "procedure")
        self.require_writable("procedures")
        self.refuse_secrets("procedure", text=content, name=name)

        def twins() -> tuple[Similar, ...]:
            body = duplicates.body_of(content)
            prints = procedures.fingerprints(self.layout, self.store)
            others = []
            for other in duplicates.candidates(name, body, prints):
                with contextlib.suppress(MemdirError):
                    others.append((other, duplicates.body_of(self.procedure(other).content)))
            return duplicates.among(
                "procedure", name, body, others, self.settings.duplicate_lexical
            )

        result = procedures.write(self.layout, name, content, twins)
        if result.duplicate:
            return result._replace(hint=duplicates.named_hint("procedure", result.name))
        self._count("procedures")
        self._embed_written(files=[self.layout.procedure(name)])
        similar = duplicates.merged(
            result.similar, self._similar_files("procedure", name, duplicates.body_of(content))
        )
        return result._replace(similar=similar, hint=duplicates.similar_hint(similar, name))

    def procedure(self, name: str) -> Procedure:
        return procedures.read(self.layout, name)

    def procedures(self) -> list[Procedure]:
        return procedures.list_all(self.layout)

    def start_session(self, surface: str = "cli", parent: str | None = None) -> Session:
        """U1: a new session. With a parent it is a subagent session: read-only (U2)."""
        surface = sessions.check_surface(surface)
        found: Session | None = None
        if parent is not None:
            sessions.check_id(parent)
            found = self.store.get_session(parent)
            if found is None:
                raise NotFoundError(
                    f"unknown parent session {parent!r}: the sessions are listed by "
                    f"{advice.sessions()}"
                )
        sessions.check_may_start(self.session, found, self.store.get_session)
        self._enabled("start a session")
        now = self.clock()
        return self.store.start_session(sessions.new_id(now), surface, parent, iso(now))

    def end_session(self, session_id: str) -> Session:
        """U3: record the end of a top-level session with the counts of what it wrote.
        A subagent's end is not recorded: it wrote nothing and keeps no record."""
        sessions.check_id(session_id)
        found = self.store.get_session(session_id)
        if found is None:
            raise NotFoundError(
                f"unknown session {session_id!r}: the sessions are listed by {advice.sessions()}"
            )
        sessions.check_may_end(self.session, found, self.store.get_session)
        if found.is_subagent:
            return found
        if found.ended is not None:
            raise ConflictError(f"session {session_id} already ended at {found.ended}")
        self._enabled("end a session")
        ended = self.store.end_session(session_id, self._now())
        if session_id == self.session_id:
            self._session = ended
        return ended

    def sessions(self, limit: int = 100) -> list[Session]:
        return self.store.list_sessions(search.check_limit(limit))


def open_memory(state_dir: str | None = None, **options: Any) -> Memory:
    return Memory(state_dir, **options)


class InitResult(Record):
    state_dir: str
    created: bool  # the state dir was made now
    gitignore: str | None  # the .gitignore a line was added to
    memory_dir: str


def init_project(
    cwd: str | None = None,
    state_dir: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
) -> InitResult:
    """L1/L6: make a store: `state_dir`, else $MEMDIR_STATE_DIR, else ./.memdir; with a
    commented config.toml and its memory root ($MEMDIR_MEMORY_DIR, `memory.path`, else
    <state>/memory). A default memory root inside a git work tree is kept out of git."""
    env = os.environ if env is None else env
    cwd = os.getcwd() if cwd is None else cwd
    state = resolve_state_dir(state_dir, env, cwd)
    path = state.path if state.explicit else os.path.join(cwd, PROJECT_DIR)
    created = not os.path.isdir(path)
    files.ensure_dir(path)
    config = os.path.join(path, "config.toml")
    if not os.path.exists(config):
        files.atomic_write(config, config_template(), root=path)
    settings = load_settings(config)
    memory_dir, named_by = memory_dir_source(path, settings.path, env, cwd)
    check_memory_root(memory_dir, named_by, path, env)
    files.ensure_dir(memory_dir)
    gitignore = _ignore_in_git(path, memory_dir) if named_by is None else None
    return InitResult(path, created, gitignore, memory_dir)


def _ignore_in_git(state_dir: str, memory_dir: str) -> str | None:
    """L6: inside a git work tree, add the memory root to the .gitignore beside the state
    dir (in it, when the state dir is the top of the work tree), unless an equivalent line
    is there already. Outside one, no .gitignore is written. Only appends: the user's lines
    are never rewritten."""
    top = git_work_tree(state_dir)
    if top is None:
        return None
    folder = state_dir if top == os.path.abspath(state_dir) else os.path.dirname(state_dir)
    rel = os.path.relpath(memory_dir, folder).replace(os.sep, "/")
    path = os.path.join(folder, ".gitignore")
    current = files.read_text(path, root=folder) or ""
    present = {x.strip().strip("/") for x in current.splitlines()}
    covered = {rel}
    while "/" in rel:  # an ignored parent (".memdir") covers the memory root too
        rel = rel.rsplit("/", 1)[0]
        covered.add(rel)
    if covered & present:
        return None
    with open(path, "a", encoding="utf-8") as handle:
        if current and not current.endswith("\n"):
            handle.write("\n")
        handle.write(os.path.relpath(memory_dir, folder).replace(os.sep, "/") + "/\n")
    return path


def ingest_output(
    output: str,
    *,
    state_dir: str | None = None,
    session: str | None = None,
    agent: str | None = None,
    task: str | None = None,
    workflow: str | None = None,
    step: str | None = None,
    policy: object = None,
) -> Ingested:
    """M4 for front ends: memorize never fails its caller, not even when the store cannot
    be opened (a broken config.toml): the blocks are then stripped with the default prefix,
    and why nothing was stored is a warning."""
    try:
        memory = Memory(state_dir, session=session, agent=agent)
    except MemdirError as exc:
        parsed = markers.parse(output)
        warnings = [*parsed.warnings]
        if parsed.requests:
            warnings.append(f"{len(parsed.requests)} memorize request(s) dropped: {exc}")
        return Ingested(parsed.output, [], warnings)
    with memory:
        return memory.ingest(output, task=task, workflow=workflow, step=step, policy=policy)
