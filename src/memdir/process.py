"""Facts about the process a call is made for, where another process may run it (C, K3).

The `memdir` command may hand a call to a warm process forked for it (cli/forkserver.py);
the forked process then answers as the caller would, and the few facts about the caller
it cannot see for itself are set here: the caller's parent (what a hook names as its host,
sessions.host_process). Also where the user's private sockets live, for the fork server
and the store workers alike (search/worker.py).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

SUN_PATH_MAX = 107  # bytes of a socket's path, its NUL aside (Linux: sun_path[108])

_parent_pid: int | None = None  # the caller's parent, when this process runs its call


def parent_pid() -> int:
    """The parent of the process the user or host started: ours, unless we run its call."""
    return os.getppid() if _parent_pid is None else _parent_pid


_stores: list[tuple[str, str]] = []  # (state dir, memory root) opened here, newest last


def opened_store(state_dir: str, memory_dir: str) -> None:
    """A store this process opened: a forked call's child names them to the server, which
    readies them for its next calls (cli/forkserver.py)."""
    place = (state_dir, memory_dir)
    if place in _stores:
        _stores.remove(place)
    _stores.append(place)
    del _stores[:-4]


def opened_stores() -> list[tuple[str, str]]:
    return list(_stores)


def forget_opened_stores() -> None:
    _stores.clear()


def forked() -> bool:
    """Whether this process runs a call forked for another (cli/forkserver.py), which
    ends with os._exit: the stores it opened may be left to that exit (cli/common)."""
    return _parent_pid is not None


def act_for(parent: int) -> None:
    """From now on this process answers for a caller whose parent is `parent`."""
    global _parent_pid
    _parent_pid = parent


def runtime_path(name: str, env: Mapping[str, str] | None = None) -> tuple[str, str]:
    """(folder, path) of a socket named `name` in the user's private runtime folder:
    $XDG_RUNTIME_DIR/memdir/, or /tmp/memdir-<uid>/ when that is unset or too deep for a
    socket's path. The folder is made and checked by whoever binds there (private_dir).
    `env`: another process's environment (default: this one's)."""
    runtime = (os.environ if env is None else env).get("XDG_RUNTIME_DIR")
    bases = [os.path.join(runtime, "memdir")] if runtime else []
    bases.append(f"/tmp/memdir-{os.getuid()}")
    for base in bases:
        path = os.path.join(base, name)
        if len(os.fsencode(path)) <= SUN_PATH_MAX:
            break
    return base, path


def private_dir(path: str) -> bool:
    """Make `path` (mode 0700) if it is missing; whether it is this user's alone (a socket
    in a folder another user can write to could be replaced by theirs)."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    info = os.lstat(path)
    return info.st_uid == os.getuid() and not info.st_mode & 0o077 and os.path.isdir(path)
