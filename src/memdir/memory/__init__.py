"""The Memory facade: the one library API that the CLI, the MCP server and the agent tools
call. Memory is composed of parts, each named by what it holds; every part builds on
MemoryBase and on the concept modules, never on another part (.importlinter: the parts
are independent; mypy: each part is typed against MemoryBase alone, so a call through
`self` into another part does not type-check).

base.py (MemoryBase): where memory lives, who writes, whether writing is allowed.
    Memory(...), close, companion, path, child_env, bind_session, session, read_only,
    require_writable, refuse_secrets, bulk; the writes several parts make (an entry
    through the duplicate guard, a task note, a task's lineage).
facts.py (FactMemory): the fact archive, F1-F5.
    add_fact, add_facts, supersede_fact, remove_fact, fact_saying, import_facts,
    get_fact, fact_history
files.py (FileMemory): the files under the memory root, H, G, P, E.
    hot, hot_injected, hot_set, hot_append, hot_remove; write_entry, entry, entries,
    remove_entry; write_procedure, procedure, procedures; daily_append, daily,
    daily_log; get (lines of any memory file: Lines)
tasks.py (TaskMemory): tasks and their notes, T1-T4.
    start_task, end_task, task, add_note, notes, prune
agent.py (AgentMemory): the agent loop, M, R, B, D.
    ingest (memorize), recall, boot, heartbeat_due, heartbeat_status, heartbeat_mark,
    distill, distill_done
search.py (SearchMemory): search and what keeps it current, Q1-Q3.
    search, search_mode, search_notice, embedder, flush_hits, reindex (Reindexed),
    embed_pending, sync_index
sessions.py (SessionMemory): sessions and statistics, U1-U4, D2.
    start_session, adopt_session, end_session, sessions, stats
browse.py (BrowseMemory): what a person browsing memory sees, V.
    timeline, revision, task_family, daily_days
This module: Memory itself, open_memory, init_project (InitResult) and ingest_output.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ..errors import MemdirError
from ..lazy import lazy
from ..models import Ingested
from ..paths import (
    PROJECT_DIR,
    check_memory_root,
    git_work_tree,
    memory_dir_source,
    resolve_state_dir,
)
from ..records import Record
from ..settings import config_template, load_settings

# Under another name: importing the part .files binds `files` in this package's namespace.
from ..storage import files as store_files
from .agent import AgentMemory
from .browse import BrowseMemory, TaskFamily
from .facts import FactMemory
from .files import FileMemory, Lines
from .search import Reindexed, SearchMemory
from .sessions import SessionMemory
from .tasks import TaskMemory

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .. import markers
else:
    markers = lazy("memdir.markers")

__all__ = [
    "InitResult",
    "Lines",
    "Memory",
    "Reindexed",
    "TaskFamily",
    "ingest_output",
    "init_project",
    "open_memory",
]


class Memory(
    SearchMemory, FactMemory, FileMemory, TaskMemory, AgentMemory, SessionMemory, BrowseMemory
):
    """One store, seen by one caller. Cheap to create; the database opens on first use.

    Memory(state_dir=None, *, session=None, surface="cli", agent=None, env=None, cwd=None,
    clock=time.time, create=False): the state dir resolves as L1 says when not given. A
    state dir or memory root named by the caller must exist unless `create` (see
    MemoryBase).
    """


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
    store_files.ensure_dir(path)
    config = os.path.join(path, "config.toml")
    if not os.path.exists(config):
        store_files.atomic_write(config, config_template(), root=path)
    settings = load_settings(config)
    memory_dir, named_by = memory_dir_source(path, settings.path, env, cwd)
    check_memory_root(memory_dir, named_by, path, env)
    store_files.ensure_dir(memory_dir)
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
    current = store_files.read_text(path, root=folder) or ""
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
