"""Where memory lives (L1, L2, L4, L5) and the checks that keep every path inside it (X1).

Paths are plain strings through os.path: pathlib costs ~7 ms of import on every CLI call.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from .errors import NotFoundError, ValidationError
from .names import NAME_MAX, full_match, is_name
from .records import Record

STATE_ENV = "MEMDIR_STATE_DIR"
MEMORY_ENV = "MEMDIR_MEMORY_DIR"
SESSION_ENV = "MEMDIR_SESSION_ID"
PROJECT_DIR = ".memdir"
USER_STATE_DIR = os.path.join("~", ".memdir", "state")

ALLOW_ROOT_ENV = "MEMDIR_ALLOW_ROOT"

# The locks the writers of global entries (and MEMORY.md) and of procedures hold: named
# here, beside the other lock names of lock_of, so paths depends on no writer.
ENTRIES_LOCK = "global"
PROCEDURES_LOCK = "procedures"

# Every pattern that validates a name is used with fullmatch (names.full_match), never
# match: `$` also matches before a trailing newline (X1).
TASK_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
DATE_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")  # \d would take any script\'s digits


class StateDir(Record):
    path: str
    source: str  # how it was found: "argument", "env", "project" or "user"

    @property
    def explicit(self) -> bool:
        """Named by the caller (an argument or MEMDIR_STATE_DIR), not found by looking:
        such a folder must exist, since a typo must never start an empty store (L1)."""
        return self.source in ("argument", "env")


class Layout(Record):
    """The files of one store (L2). Nothing here touches the disk."""

    state_dir: str
    memory_dir: str

    @property
    def config(self) -> str:
        return os.path.join(self.state_dir, "config.toml")

    @property
    def hot(self) -> str:
        return os.path.join(self.memory_dir, "HOT.md")

    @property
    def db(self) -> str:
        return os.path.join(self.memory_dir, "memory.db")

    @property
    def procedures_dir(self) -> str:
        return os.path.join(self.memory_dir, "procedures")

    @property
    def locks_dir(self) -> str:
        return os.path.join(self.memory_dir, ".locks")

    @property
    def global_dir(self) -> str:
        return os.path.join(self.memory_dir, "global")

    @property
    def index_file(self) -> str:
        return os.path.join(self.memory_dir, "MEMORY.md")

    @property
    def tasks_dir(self) -> str:
        return os.path.join(self.memory_dir, "tasks")

    def entry(self, name: str) -> str:
        return os.path.join(self.global_dir, validate_name(name, "entry") + ".md")

    def task_notes(self, task_id: str) -> str:
        return os.path.join(self.tasks_dir, validate_task_id(task_id) + ".md")

    def procedure(self, name: str) -> str:
        return os.path.join(self.procedures_dir, validate_name(name, "procedure") + ".md")


def resolve_state_dir(explicit: str | None, env: Mapping[str, str], cwd: str) -> StateDir:
    """L1: argument, MEMDIR_STATE_DIR, the nearest .memdir/ upwards, then ~/.memdir/state."""
    if explicit:
        return StateDir(_absolute(explicit, cwd), "argument")
    if env.get(STATE_ENV):
        return StateDir(_absolute(env[STATE_ENV], cwd), "env")
    project = find_project_dir(cwd)
    if project is not None:
        return StateDir(project, "project")
    return StateDir(os.path.expanduser(USER_STATE_DIR), "user")


def find_project_dir(cwd: str) -> str | None:
    """The nearest `.memdir/` folder from cwd upwards, like git finds `.git`."""
    here = os.path.abspath(cwd)
    while True:
        candidate = os.path.join(here, PROJECT_DIR)
        if os.path.isdir(candidate):
            return candidate
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def resolve_memory_dir(
    state_dir: str, configured: str | None, env: Mapping[str, str], cwd: str
) -> str:
    """L5 before L2: MEMDIR_MEMORY_DIR wins over `memory.path`, which wins over <state>/memory."""
    return memory_dir_source(state_dir, configured, env, cwd)[0]


def memory_dir_source(
    state_dir: str, configured: str | None, env: Mapping[str, str], cwd: str
) -> tuple[str, str | None]:
    """(the memory root, what named it: MEMDIR_MEMORY_DIR, "memory.path" or None for the
    default <state>/memory)."""
    default = os.path.join(state_dir, "memory")
    if env.get(MEMORY_ENV):
        return _absolute(env[MEMORY_ENV], cwd), MEMORY_ENV
    if configured and _absolute(configured, state_dir) != default:
        return _absolute(configured, state_dir), "memory.path"
    return default, None


def require_state_dir(state: StateDir, create: bool = False) -> None:
    """L1: a state dir the caller named must exist (or be made, with `create`); the ones
    found by looking (.memdir/ upwards, ~/.memdir/state) are made on first write."""
    if not state.explicit:
        return
    if os.path.isdir(state.path):
        return
    if os.path.exists(state.path) and not os.path.isdir(state.path):  # made meanwhile: fine
        raise ValidationError(f"state dir {state.path} is a file, not a folder: fix the path")
    if create:
        _make(state.path)
        return
    hint = f"create it with `memdir init --state-dir {_quoted(state.path)}`"
    if state.source == "argument":
        raise NotFoundError(
            f"state dir {state.path} does not exist: {hint}, or fix the path",
            kind="state dir",
            path=state.path,
        )
    raise NotFoundError(
        f"{STATE_ENV} points at {state.path}, which does not exist: {hint}, or fix the variable",
        kind="state dir",
        path=state.path,
    )


def require_memory_dir(
    memory_dir: str, named_by: str | None, state_dir: str, create: bool = False
) -> None:
    """L5, L6: a memory root named by MEMDIR_MEMORY_DIR or `memory.path` must exist too (or
    be made, with `create`); the default <state>/memory is made on first write."""
    if named_by is None or os.path.isdir(memory_dir):
        return
    if os.path.exists(memory_dir) and not os.path.isdir(memory_dir):
        raise ValidationError(f"memory dir {memory_dir} ({named_by}) is a file, not a folder")
    if create:
        _make(memory_dir)
        return
    hint = f"create it with `memdir init --state-dir {_quoted(state_dir)}`"
    if named_by == MEMORY_ENV:
        raise NotFoundError(
            f"{MEMORY_ENV} points at {memory_dir}, which does not exist: {hint}, "
            "or fix the variable",
            kind="memory dir",
            path=memory_dir,
        )
    config = os.path.join(state_dir, "config.toml")
    raise NotFoundError(
        f"memory dir {memory_dir} (memory.path in {config}) does not exist: {hint}, "
        "or fix memory.path",
        kind="memory dir",
        path=memory_dir,
    )


def check_memory_root(
    memory_dir: str, named_by: str | None, state_dir: str, env: Mapping[str, str]
) -> None:
    """X1: a memory root that holds the project (the state dir's work tree), the home
    folder or `/` would let `memory.path = ".."` in a cloned repository turn memdir into a
    reader of the project's files (.env, .git/config). Such a root is refused unless the
    user confirms it outside any repository: MEMDIR_ALLOW_ROOT names it (several are
    separated by os.pathsep). A sibling folder (`../team-memory`) holds none of them."""
    real = os.path.realpath(memory_dir)
    guarded = {os.path.realpath(os.sep): "the filesystem root /"}
    home = os.path.expanduser("~")
    if home != "~":
        guarded.setdefault(os.path.realpath(home), f"your home folder {home}")
    project = git_work_tree(state_dir)
    if os.path.basename(os.path.normpath(state_dir)) == PROJECT_DIR:
        guarded.setdefault(os.path.realpath(os.path.dirname(state_dir)), "")
    if project is not None:
        guarded.setdefault(os.path.realpath(project), "")
    held = [
        (folder, what or f"the project {folder}")
        for folder, what in guarded.items()
        if folder == real or folder.startswith(real.rstrip(os.sep) + os.sep)
    ]
    if not held:
        return
    allowed = {
        os.path.realpath(os.path.expanduser(p))
        for p in env.get(ALLOW_ROOT_ENV, "").split(os.pathsep)
        if p.strip()
    }
    if real in allowed:
        return
    source = (
        f"memory.path in {os.path.join(state_dir, 'config.toml')}"
        if named_by == "memory.path"
        else named_by or "the default"
    )
    raise ValidationError(
        f"memory root {memory_dir} ({source}) contains {held[0][1]}: memdir would read and "
        f"write files there, so it is refused. Point it at a folder of its own (e.g. "
        f"../team-memory), or, if you mean it, confirm outside the repository with "
        f"{ALLOW_ROOT_ENV}={_quoted(real)} in your environment"
    )


def git_work_tree(folder: str) -> str | None:
    """The top of the git work tree holding `folder`, found as git does: the nearest `.git`
    (a folder, or the file of a worktree or submodule) upwards. No git process is run."""
    here = os.path.abspath(folder)
    while True:
        if os.path.exists(os.path.join(here, ".git")):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def _make(folder: str) -> None:
    from .storage import files

    files.ensure_dir(folder)


def _quoted(path: str) -> str:
    """A path as a shell word, so the hinted command runs as written."""
    import shlex  # only on the error path

    return shlex.quote(path)


def is_task_id(task_id: object) -> bool:
    """X1: letters, digits, '.', '_' and '-', at most 128, never `..`: one file name."""
    return full_match(TASK_ID_RE, task_id) and ".." not in str(task_id)


def is_date_name(date: object) -> bool:
    """The shape of a daily log's name, YYYY-MM-DD (daily.path_of also checks the calendar)."""
    return full_match(DATE_RE, date)


# which stems each tier's folder holds: a file named otherwise is not memory (X1)
STEM_CHECKS = {"global": is_name, "procedures": is_name, "tasks": is_task_id, "daily": is_date_name}


HOT_OVERFLOW = "HOT.overflow.md"  # what HOT.md's cap cut, kept for the user (H3)


def is_memory_file(rel: str) -> bool:
    """Whether `rel` (relative to the memory root, '/'-separated) is a file of the layout
    (L2): HOT.md, what its cap cut, MEMORY.md, or <tier>/<valid name>.md. What `get` may
    read (X1)."""
    if rel in ("HOT.md", HOT_OVERFLOW, "MEMORY.md"):
        return True
    folder, _, name = rel.partition("/")
    check = STEM_CHECKS.get(folder)
    return check is not None and name.endswith(".md") and check(name[:-3])


def is_inside(root: str, path: str) -> bool:
    """Whether `path`, symlinks resolved, is `root` or lies under it (X1)."""
    real_root, real = os.path.realpath(root), os.path.realpath(path)
    return real == real_root or real.startswith(real_root + os.sep)


def validate_name(name: str, what: str) -> str:
    if not is_name(name):
        raise ValidationError(
            f"bad {what} name {_shown(name)}: use kebab-case (lowercase letters, digits and single "
            f"hyphens, e.g. 'deploy-staging'), at most {NAME_MAX} characters"
        )
    return name


def validate_task_id(task_id: str) -> str:
    """X1: a task id names a file, so it is letters, digits, '.', '_' and '-' only."""
    if not is_task_id(task_id):
        raise ValidationError(
            f"bad task id {_shown(task_id)}: use letters, digits, '.', '_' or '-' (at most 128), "
            "starting with a letter or digit"
        )
    return task_id


def shown_path(rel: str) -> str:
    """A file name found on disk, fit for one line of output: as it is when printable,
    else quoted with its line breaks and control characters escaped (X1)."""
    return rel if rel.isprintable() else repr(rel)


def _shown(value: object) -> str:
    """A bad value quoted for an error: repr (a line break shows as \\n), cut at 80."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def safe_path(root: str, relative: str) -> str:
    """X1: resolve `relative` under `root`, refusing absolute paths, `..` and symlinks out."""
    if not relative or os.path.isabs(relative) or "\0" in relative:
        raise ValidationError(f"bad path {relative!r}: give a path relative to the memory root")
    target = os.path.join(os.path.realpath(root), relative)
    if not is_inside(root, target):
        raise ValidationError(f"path {relative!r} points outside the memory root {root}")
    return os.path.realpath(target)


def _absolute(path: str, base: str) -> str:
    return os.path.normpath(os.path.join(base, os.path.expanduser(path)))


def lock_of(rel: str) -> str | None:
    """The lock every writer of memory-root file `rel` ("global/x.md") holds, if any: what
    another writer of it (an import, doctor's temp sweep) must hold too."""
    if rel in ("HOT.md", "HOT.md.bak", HOT_OVERFLOW):
        return "HOT.md"
    if rel == "heartbeat-state.json":
        return "heartbeat"
    if rel == "MEMORY.md":
        return ENTRIES_LOCK
    folder, _, name = rel.rpartition("/")
    stem = name[:-3] if name.endswith(".md") else ""
    if folder == "global":
        return ENTRIES_LOCK
    if folder == "procedures" and is_name(stem):
        return PROCEDURES_LOCK
    if folder == "tasks" and is_task_id(stem):
        return f"task-{stem}"
    if folder == "daily" and is_date_name(stem):
        return f"daily-{stem}"
    return None
